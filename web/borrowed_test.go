package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"dubstudio/studio"
)

// TestScriptSaysWhatATakeBorrowed: a line whose take borrowed time from the gap after
// its slot says so in the script ("1.50 s slot, 1.80 s with 300 ms borrowed") and its
// lock label names the borrowed time; a line whose take fits its slot keeps the plain
// "locked".
func TestScriptSaysWhatATakeBorrowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	lines := b.allLines(t)
	long, fits := lines[0], lines[1]
	require.True(t, long.DurationLock)
	takeWith(t, b, long, (long.DurationMs()+300)*48, 0, 440)
	takeWith(t, b, fits, fits.DurationMs()*48, 0, 440)

	for _, lang := range []struct{ code, want, lock string }{
		{"en", fmt.Sprintf("%.2f s slot, %.2f s with 300 ms borrowed", float64(long.DurationMs())/1000, float64(long.DurationMs()+300)/1000), "locked + gap"},
		{"zh", fmt.Sprintf("时间槽 %.2f s，连借用共 %.2f s（借用 300 毫秒）", float64(long.DurationMs())/1000, float64(long.DurationMs()+300)/1000), "锁定+借用"},
	} {
		c := b.as(t, studio.RoleEditor)
		resp := c.do("GET", fmt.Sprintf("/projects/%d", b.project.ID), nil, "", map[string]string{"Accept-Language": lang.code})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		d, err := goquery.NewDocumentFromReader(strings.NewReader(readAll(t, resp)))
		require.NoError(t, err)
		row := d.Find(fmt.Sprintf("#line-%d", long.ID))
		require.Equal(t, lang.want, strings.TrimSpace(row.Find(`[data-testid=line-borrowed]`).Text()), lang.code)
		require.Equal(t, lang.lock, strings.TrimSpace(row.Find(".lock").Text()), lang.code)
		other := d.Find(fmt.Sprintf("#line-%d", fits.ID))
		require.Zero(t, other.Find(`[data-testid=line-borrowed]`).Length(), "a take that fits borrows nothing")
		require.NotEqual(t, lang.lock, strings.TrimSpace(other.Find(".lock").Text()))
	}
}
