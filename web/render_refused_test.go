package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"dubstudio/studio"
	"dubstudio/studio/studiotest"
)

// A line longer than MAX_LINE_SECONDS (imported under a higher setting) is not
// queued: the notice after "Render pending" counts the others and names it with its
// length, in the user's language, without the success colour; rendering it alone is
// refused with the same message.
func TestRenderSaysWhichLinesAreTooLong(t *testing.T) {
	t.Parallel()
	b := setupQueueing(t)
	ctx := context.Background()
	ls := b.allLines(t)
	studiotest.Exec(t, b.store, `UPDATE lines SET end_ms = start_ms + 90000 WHERE id = $1`, ls[1].ID)
	c := b.as(t, studio.RoleEditor)
	p := "/projects/" + strconv.FormatInt(b.project.ID, 10)

	resp := c.htmx("POST", p+"/render", url.Values{})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	notice := doc(t, resp).Find(`[data-testid=notice]`)
	require.Equal(t, "Queued 2 lines. Line 2 was not queued: it lasts 90 s, and a line may last at most 60 s "+
		"(setting MAX_LINE_SECONDS). Split it into shorter lines.", notice.Text())
	require.False(t, notice.HasClass("ok"))
	now := b.allLines(t)
	require.Equal(t, []studio.LineState{studio.StateQueued, studio.StateDraft, studio.StateQueued},
		[]studio.LineState{now[0].State, now[1].State, now[2].State})

	require.NoError(t, b.store.SetUserLang(ctx, b.users[studio.RoleEditor].ID, "zh"))
	resp = c.htmx("POST", fmt.Sprintf("%s/lines/%d/render", p, ls[1].ID), url.Values{})
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, doc(t, resp).Text(), "第 2 句未加入队列：它长 90 秒，一句台词最长 60 秒（设置 MAX_LINE_SECONDS）。请拆分为较短的几句。")
	require.Equal(t, studio.StateDraft, b.allLines(t)[1].State)
}
