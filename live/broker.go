// Package live carries line changes from the database to the people watching them.
//
// PostgreSQL announces every committed change to a line on the channel dubstudio_lines
// (triggers in migrations/0002_pipeline.up.sql). A Listener holds one connection that
// LISTENs on it and hands each notification to a Broker, which fans events out to the
// subscribers of the line's project: the web server's event streams, one per open
// editor page. The broker never blocks the listener: subscribers have bounded buffers,
// a subscriber that falls behind gets one Resync instead of the events it missed, and a
// burst of changes in one project is coalesced into a single Resync.
package live

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// Channel is the notification channel the line triggers announce on.
const Channel = "dubstudio_lines"

// Kind says what an Event asks a subscriber to do.
type Kind int

const (
	// KindLine: one line changed; show its new version.
	KindLine Kind = iota + 1
	// KindResync: lines were added or removed, or events were lost; reload everything.
	KindResync
)

func (k Kind) String() string {
	switch k {
	case KindLine:
		return "line"
	case KindResync:
		return "resync"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is a change in one project.
type Event struct {
	Kind      Kind
	ProjectID int64
	// LineID, State and Revision describe the line of a KindLine event, as of the
	// commit that sent it.
	LineID   int64
	State    string
	Revision int
}

// notification is the JSON payload of the line triggers.
type notification struct {
	P   int64  `json:"p"`
	L   int64  `json:"l"`
	S   string `json:"s"`
	R   int    `json:"r"`
	All bool   `json:"all"`
}

// ParseNotification reads a payload of the dubstudio_lines channel:
// {"p":project,"l":line,"s":"state","r":revision} for a changed line, or
// {"p":project,"all":true} when lines were inserted or deleted.
func ParseNotification(payload string) (Event, error) {
	var n notification
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return Event{}, fmt.Errorf("error parsing notification %q: %w", payload, err)
	}
	if n.P <= 0 {
		return Event{}, fmt.Errorf("notification %q names no project", payload)
	}
	if n.All {
		return Event{Kind: KindResync, ProjectID: n.P}, nil
	}
	if n.L <= 0 {
		return Event{}, fmt.Errorf("notification %q names no line", payload)
	}
	return Event{Kind: KindLine, ProjectID: n.P, LineID: n.L, State: n.S, Revision: n.R}, nil
}

// BrokerConfig tunes a Broker; zero values take the defaults.
type BrokerConfig struct {
	// Window is how long a project's events are gathered before they are delivered,
	// so that a burst can be coalesced (default 100 ms; negative: deliver at once).
	Window time.Duration
	// BurstLines is the most distinct lines one window delivers one by one; more
	// become a single Resync (default 20).
	BurstLines int
	// Buffer is each subscriber's queue length (default 64). A subscriber whose queue
	// is full has it replaced by a single Resync.
	Buffer int
}

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c.Window == 0 {
		c.Window = 100 * time.Millisecond
	}
	if c.BurstLines <= 0 {
		c.BurstLines = 20
	}
	if c.Buffer <= 0 {
		c.Buffer = 64
	}
	return c
}

// Broker fans events out to the subscribers of each project. It is safe for
// concurrent use; Publish and ResyncAll never block on a subscriber.
type Broker struct {
	cfg BrokerConfig

	mu      sync.Mutex
	subs    map[int64]map[*Subscription]struct{}
	pending map[int64]*batch

	// What Mark reads: the broker's start, how many times events were lost
	// (ResyncAll), and how many events each project has had, watched or not (one
	// counter per project that had one).
	start     int64
	lost      uint64
	published map[int64]uint64
}

// batch gathers one project's events during a window.
type batch struct {
	lines  []Event       // in order of first change, each line's latest event
	index  map[int64]int // line ID -> position in lines
	resync bool
	timer  *time.Timer
}

// NewBroker returns a broker with no subscribers.
func NewBroker(cfg BrokerConfig) *Broker {
	return &Broker{cfg: cfg.withDefaults(), subs: map[int64]map[*Subscription]struct{}{}, pending: map[int64]*batch{},
		start: time.Now().UnixNano(), published: map[int64]uint64{}}
}

// Mark says which of a project's events have been published so far. A page takes it
// before it reads the lines it shows and passes it to its event stream, whose
// subscription starts later: Changed then says whether an event came in between,
// which the stream would not carry.
func (b *Broker) Mark(projectID int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.markLocked(projectID)
}

func (b *Broker) markLocked(projectID int64) string {
	return fmt.Sprintf("%x.%d.%d", b.start, b.lost, b.published[projectID])
}

// Changed reports whether the project has had an event since mark (Mark) was
// taken, or events were lost; a mark of another broker (another server, or this
// one before a restart) or none has changed.
func (b *Broker) Changed(projectID int64, mark string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return mark != b.markLocked(projectID)
}

// Subscription receives the events of one project.
type Subscription struct {
	ProjectID int64
	ch        chan Event
	broker    *Broker
}

// C delivers the subscription's events. It is never closed.
func (s *Subscription) C() <-chan Event { return s.ch }

// Close ends the subscription; its channel receives nothing more.
func (s *Subscription) Close() {
	b := s.broker
	b.mu.Lock()
	defer b.mu.Unlock()
	if set := b.subs[s.ProjectID]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(b.subs, s.ProjectID)
			if p := b.pending[s.ProjectID]; p != nil {
				p.timer.Stop()
				delete(b.pending, s.ProjectID)
			}
		}
	}
}

// Subscribe starts receiving the events of a project. Close the subscription when done.
func (b *Broker) Subscribe(projectID int64) *Subscription {
	s := &Subscription{ProjectID: projectID, ch: make(chan Event, b.cfg.Buffer), broker: b}
	b.mu.Lock()
	defer b.mu.Unlock()
	set := b.subs[projectID]
	if set == nil {
		set = map[*Subscription]struct{}{}
		b.subs[projectID] = set
	}
	set[s] = struct{}{}
	return s
}

// Subscribers counts the open subscriptions of a project.
func (b *Broker) Subscribers(projectID int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[projectID])
}

// Publish hands an event to the project's subscribers after the coalescing window.
// Events of projects nobody watches are dropped at once.
func (b *Broker) Publish(ev Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published[ev.ProjectID]++
	if len(b.subs[ev.ProjectID]) == 0 {
		return
	}
	if b.cfg.Window < 0 {
		b.deliverLocked(ev.ProjectID, ev)
		return
	}
	p := b.pending[ev.ProjectID]
	if p == nil {
		pid := ev.ProjectID
		p = &batch{index: map[int64]int{}}
		p.timer = time.AfterFunc(b.cfg.Window, func() { b.flush(pid, p) })
		b.pending[pid] = p
	}
	switch {
	case p.resync:
		// The project reloads anyway.
	case ev.Kind != KindLine:
		p.resync, p.lines, p.index = true, nil, nil
	default:
		if i, seen := p.index[ev.LineID]; seen {
			p.lines[i] = ev
		} else if len(p.lines) >= b.cfg.BurstLines {
			p.resync, p.lines, p.index = true, nil, nil
		} else {
			p.index[ev.LineID] = len(p.lines)
			p.lines = append(p.lines, ev)
		}
	}
}

// flush delivers a project's batch when its window ends.
func (b *Broker) flush(projectID int64, p *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[projectID] != p {
		return // superseded by ResyncAll or the last subscriber leaving
	}
	delete(b.pending, projectID)
	if p.resync {
		b.deliverLocked(projectID, Event{Kind: KindResync, ProjectID: projectID})
		return
	}
	for _, ev := range p.lines {
		b.deliverLocked(projectID, ev)
	}
}

// ResyncAll tells every subscriber to reload, dropping what is pending: the listener
// calls it after a reconnection, since notifications sent meanwhile are lost.
func (b *Broker) ResyncAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lost++
	for pid, p := range b.pending {
		p.timer.Stop()
		delete(b.pending, pid)
	}
	for pid := range b.subs {
		b.deliverLocked(pid, Event{Kind: KindResync, ProjectID: pid})
	}
}

// deliverLocked queues ev for each subscriber of the project without waiting. A full
// queue is emptied and replaced by one Resync: the subscriber reloads instead of
// replaying what it missed, and nobody else waits for it.
func (b *Broker) deliverLocked(projectID int64, ev Event) {
	for s := range b.subs[projectID] {
		select {
		case s.ch <- ev:
			continue
		default:
		}
	drain:
		for {
			select {
			case <-s.ch:
			default:
				break drain
			}
		}
		// Only the broker sends, under b.mu, so the emptied queue has room.
		s.ch <- Event{Kind: KindResync, ProjectID: projectID}
	}
}
