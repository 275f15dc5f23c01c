package live_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"dubstudio/live"
)

func line(pid, lid int64, state string, rev int) live.Event {
	return live.Event{Kind: live.KindLine, ProjectID: pid, LineID: lid, State: state, Revision: rev}
}

// received drains what is queued for s right now.
func received(s *live.Subscription) []live.Event {
	var out []live.Event
	for {
		select {
		case ev := <-s.C():
			out = append(out, ev)
		default:
			return out
		}
	}
}

func TestParseNotification(t *testing.T) {
	t.Parallel()
	ev, err := live.ParseNotification(`{"p":3,"l":17,"s":"synthesizing","r":4}`)
	require.NoError(t, err)
	require.Equal(t, line(3, 17, "synthesizing", 4), ev)

	ev, err = live.ParseNotification(`{"p":3,"all":true}`)
	require.NoError(t, err)
	require.Equal(t, live.Event{Kind: live.KindResync, ProjectID: 3}, ev)

	for _, bad := range []string{``, `{`, `{"l":1}`, `{"p":3}`, `[1]`} {
		_, err := live.ParseNotification(bad)
		require.Error(t, err, bad)
	}
}

func TestBrokerFansOutPerProject(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := live.NewBroker(live.BrokerConfig{})
		a1, a2, other := b.Subscribe(1), b.Subscribe(1), b.Subscribe(2)
		require.Equal(t, 2, b.Subscribers(1))

		b.Publish(line(1, 10, "queued", 2))
		b.Publish(line(3, 99, "done", 2)) // nobody watches project 3
		synctest.Wait()
		require.Empty(t, received(a1), "held for the coalescing window")

		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []live.Event{line(1, 10, "queued", 2)}, received(a1))
		require.Equal(t, []live.Event{line(1, 10, "queued", 2)}, received(a2))
		require.Empty(t, received(other))

		a2.Close()
		require.Equal(t, 1, b.Subscribers(1))
		b.Publish(line(1, 10, "done", 3))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Len(t, received(a1), 1)
		require.Empty(t, received(a2), "closed subscriptions get nothing")
	})
}

func TestBrokerCoalescesBursts(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := live.NewBroker(live.BrokerConfig{Window: 100 * time.Millisecond, BurstLines: 5})
		s := b.Subscribe(1)

		// One line moving through several states in one window: its last state only.
		b.Publish(line(1, 10, "queued", 2))
		b.Publish(line(1, 11, "queued", 2))
		b.Publish(line(1, 10, "synthesizing", 2))
		b.Publish(line(1, 10, "done", 2))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []live.Event{line(1, 10, "done", 2), line(1, 11, "queued", 2)}, received(s))

		// Hundreds of lines at once: one resync instead of hundreds of rows.
		for i := range 300 {
			b.Publish(line(1, int64(100+i), "queued", 1))
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []live.Event{{Kind: live.KindResync, ProjectID: 1}}, received(s))

		// Lines inserted or deleted: a resync, which swallows the window's rows.
		b.Publish(line(1, 10, "queued", 3))
		b.Publish(live.Event{Kind: live.KindResync, ProjectID: 1})
		b.Publish(line(1, 11, "queued", 3))
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, []live.Event{{Kind: live.KindResync, ProjectID: 1}}, received(s))
	})
}

func TestBrokerSlowSubscriberGetsResync(t *testing.T) {
	t.Parallel()
	b := live.NewBroker(live.BrokerConfig{Window: -1, Buffer: 4})
	slow, fast := b.Subscribe(1), b.Subscribe(1)
	for i := range 10 {
		b.Publish(line(1, int64(i+1), "queued", 1)) // never blocks, though slow never reads
		if i < 9 {
			<-fast.C()
		}
	}
	require.Equal(t, []live.Event{line(1, 10, "queued", 1)}, received(fast), "the fast one missed nothing")

	got := received(slow)
	require.LessOrEqual(t, len(got), 4)
	require.Contains(t, got, live.Event{Kind: live.KindResync, ProjectID: 1}, "the slow one reloads instead")
	require.Equal(t, live.KindResync, got[0].Kind, "nothing older than the resync is left")
}

func TestBrokerResyncAll(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := live.NewBroker(live.BrokerConfig{})
		s1, s2 := b.Subscribe(1), b.Subscribe(2)
		b.Publish(line(1, 10, "queued", 2))
		b.ResyncAll()
		require.Equal(t, []live.Event{{Kind: live.KindResync, ProjectID: 1}}, received(s1))
		require.Equal(t, []live.Event{{Kind: live.KindResync, ProjectID: 2}}, received(s2))
		time.Sleep(time.Second)
		synctest.Wait()
		require.Empty(t, received(s1), "the pending row was dropped: the resync covers it")
	})
}

// TestBrokerMarkSaysWhetherAProjectChanged: a mark taken before a page reads its
// lines changes with the project's next event, watched or not (the page's stream is
// not subscribed yet), with lost events (ResyncAll), and is another broker's on a
// restarted server; another project's events leave it as it is.
func TestBrokerMarkSaysWhetherAProjectChanged(t *testing.T) {
	b := live.NewBroker(live.BrokerConfig{Window: -1})
	mark := b.Mark(1)
	require.False(t, b.Changed(1, mark))
	b.Publish(live.Event{Kind: live.KindLine, ProjectID: 2, LineID: 20})
	require.False(t, b.Changed(1, mark), "another project's event")
	b.Publish(live.Event{Kind: live.KindLine, ProjectID: 1, LineID: 10})
	require.True(t, b.Changed(1, mark), "an event nobody watched yet")
	mark = b.Mark(1)
	require.False(t, b.Changed(1, mark))
	b.ResyncAll()
	require.True(t, b.Changed(1, mark), "events were lost")
	mark = b.Mark(1)
	require.True(t, live.NewBroker(live.BrokerConfig{}).Changed(1, mark), "another broker's mark")
	require.True(t, b.Changed(1, ""), "no mark")
}
