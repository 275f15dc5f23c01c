package script

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ttmlTag matches the root element of a TTML document, with or without a prefix.
var ttmlTag = regexp.MustCompile(`<(?:[A-Za-z_][\w.-]*:)?tt[\s>/]`)

// isTTML reports whether the file starting at line first (its first non-blank line)
// is a TTML document: it starts with markup and a <tt> element comes early.
func isTTML(lines []string, first int) bool {
	if !strings.HasPrefix(strings.TrimSpace(lines[first]), "<") {
		return false
	}
	var head strings.Builder
	for i := first; i < len(lines) && i < first+200 && head.Len() < 16<<10; i++ {
		head.WriteString(lines[i])
		head.WriteByte('\n')
	}
	return ttmlTag.MatchString(head.String())
}

// ttmlRates are the frame and tick rates and the time base of a document (its ttp:
// parameters), which the "f" and "t" time units and clock times with frames count in.
type ttmlRates struct {
	frameRate    float64 // effective: ttp:frameRate × ttp:frameRateMultiplier
	nominal      float64 // ttp:frameRate, the frames a second of a timecode's labels
	subFrameRate float64
	tickRate     float64
	// smpte is set by ttp:timeBase="smpte": clock times with frames are SMPTE
	// timecodes, labels counted at the nominal rate, with the frames that dropMode
	// drops (drop is "dropNTSC", "dropPAL" or "" for nonDrop) left out.
	smpte bool
	drop  string
}

// ttmlRatesOf reads the ttp: parameters of the root element; defaults as in TTML:
// 30 frames a second, one sub-frame, and a tick rate of frame rate × sub-frame rate
// when a frame rate is given, else 1.
func ttmlRatesOf(attrs []xml.Attr) (ttmlRates, bool) {
	num := func(v string) (float64, bool) {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
		return float64(n), err == nil && n > 0
	}
	frameRate, subFrameRate, tickRate, multiplier := 30.0, 1.0, 0.0, 1.0
	frameRateSet := false
	smpte, drop := false, ""
	for _, a := range attrs {
		var ok bool
		switch a.Name.Local {
		case "timeBase":
			// "clock" times are read as media times: a script's times are offsets.
			switch v := strings.TrimSpace(a.Value); v {
			case "media", "clock", "smpte":
				smpte, ok = v == "smpte", true
			}
		case "dropMode":
			switch v := strings.TrimSpace(a.Value); v {
			case "nonDrop":
				drop, ok = "", true
			case "dropNTSC", "dropPAL":
				drop, ok = v, true
			}
		case "frameRate":
			frameRate, ok = num(a.Value)
			frameRateSet = true
		case "subFrameRate":
			subFrameRate, ok = num(a.Value)
		case "tickRate":
			tickRate, ok = num(a.Value)
		case "frameRateMultiplier":
			f := strings.Fields(a.Value)
			if len(f) == 2 {
				n, okN := num(f[0])
				d, okD := num(f[1])
				multiplier, ok = n/d, okN && okD
			}
		default:
			continue
		}
		if !ok {
			return ttmlRates{}, false
		}
	}
	r := ttmlRates{frameRate: frameRate * multiplier, nominal: frameRate, subFrameRate: subFrameRate, tickRate: tickRate,
		smpte: smpte, drop: drop}
	if !smpte {
		r.drop = ""
	}
	if tickRate == 0 {
		r.tickRate = 1
		if frameRateSet {
			r.tickRate = r.frameRate * subFrameRate
		}
	}
	return r, true
}

var (
	ttmlClock  = regexp.MustCompile(`^(\d{2,}):(\d{2}):(\d{2})(?:(\.\d+)|:(\d{2,})(?:\.(\d+))?)?$`)
	ttmlOffset = regexp.MustCompile(`^(\d+(?:\.\d+)?)(h|ms|m|s|f|t)$`)
)

// time reads a TTML time expression: clock time (hh:mm:ss, hh:mm:ss.fraction,
// hh:mm:ss:frames, hh:mm:ss:frames.subframes) or offset time (a number and h, m, s,
// ms, f or t), rounded to the millisecond.
func (r ttmlRates) time(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	var sec float64
	if m := ttmlClock.FindStringSubmatch(v); m != nil {
		h, _ := strconv.ParseFloat(m[1], 64)
		mi, _ := strconv.ParseFloat(m[2], 64)
		s, _ := strconv.ParseFloat(m[3], 64)
		if mi >= 60 || s >= 60 {
			return 0, false
		}
		sec = h*3600 + mi*60 + s
		switch {
		case m[4] != "":
			f, _ := strconv.ParseFloat("0"+m[4], 64)
			sec += f
		case m[5] != "":
			frames, _ := strconv.ParseFloat(m[5], 64)
			sub := 0.0
			if m[6] != "" {
				sub, _ = strconv.ParseFloat(m[6], 64)
			}
			if r.smpte {
				sec = r.timecode(h, mi, s, frames) / r.frameRate
			}
			sec += (frames + sub/r.subFrameRate) / r.frameRate
		}
	} else if m := ttmlOffset.FindStringSubmatch(v); m != nil {
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, false
		}
		switch m[2] {
		case "h":
			sec = n * 3600
		case "m":
			sec = n * 60
		case "s":
			sec = n
		case "ms":
			sec = n / 1000
		case "f":
			sec = n / r.frameRate
		case "t":
			sec = n / r.tickRate
		}
	} else {
		return 0, false
	}
	if math.IsNaN(sec) || sec > MaxTimecode.Seconds() {
		return 0, false
	}
	return time.Duration(math.Round(sec*1000)) * time.Millisecond, true
}

// timecode returns the frames before the SMPTE timecode h:m:s:frames, the frames
// themselves not counted (the caller adds them with their sub-frames), as TTML counts
// them: labels at the nominal frame rate, less the labels dropMode skips. dropNTSC
// skips frames 00 and 01 at the start of every minute but each tenth; dropPAL skips
// 00 to 03 at the start of every even minute but minutes 00, 20 and 40.
func (r ttmlRates) timecode(h, m, s, frames float64) float64 {
	n := (h*3600 + m*60 + s) * r.nominal
	switch r.drop {
	case "dropNTSC":
		n -= (h*54 + m - math.Floor(m/10)) * 2
	case "dropPAL":
		n -= (h*27 + math.Floor(m/2) - math.Floor(m/20)) * 4
	}
	return n
}

// ttmlNode is an open timed element (tt, body, div, p, span): its interval in
// absolute time, and for a seq container the end of its last child.
type ttmlNode struct {
	begin, end time.Duration
	hasEnd     bool
	// timed is set when the element has a begin, end or dur of its own; inactive when
	// it begins at or after its parent's end, so that it is never shown (nor is what
	// it holds).
	timed, inactive bool
	seq             bool
	cursor          time.Duration
	agent           string
	preserve        bool
	// annotation is set on a ruby annotation (tts:ruby text, textContainer or
	// delimiter) and what it holds: a reading aid, not what is spoken, left out.
	// rubyFrame is set on a ruby container or base container, whose white space
	// between its children is layout, not text.
	annotation, rubyFrame bool
}

// ttmlCue is the paragraph being read.
type ttmlCue struct {
	line       int
	begin, end time.Duration
	hasEnd     bool
	agent      string
	text       strings.Builder
	// own is set when the paragraph has timing of its own. spans counts the timed
	// spans inside it that are shown, spanBegin and spanEnd are the earliest begin and
	// latest end among them, spanEnds whether each of them has an end.
	own                bool
	spans              int
	spanBegin, spanEnd time.Duration
	spanEnds           bool
}

// parseTTML reads the paragraphs (<p>) of a TTML document, as the IMSC text profiles
// that streaming platforms deliver use it: begin, end and dur on body, div, p and span
// (relative to the parent, in par or seq containers), <br/> as a line break, the text
// of <span> elements, and ttm:agent naming the character by its ttm:name in the
// document's head. Styling, layout and other metadata are ignored.
//
// Ruby (tts:ruby on spans, inline or through the styles a span references, as the
// IMSC 1.1 text profile has it): a dubbing script wants what is spoken, so a ruby
// container keeps its base text and leaves out its annotations (ruby text, text
// containers, the fallback delimiters): 東南 with とうなん above it reads 東南. The
// white space between the parts of a container is layout and is left out too.
//
// A paragraph is one cue, whatever timing its spans have: a dubbing line is what a
// subtitle event says, and spans with times of their own (words revealed one by one,
// roll-up, a second half shown later) are how it is shown, not separate lines. The
// cue takes the paragraph's interval; a paragraph with no timing of its own whose
// spans have some takes from its first span's begin to its last span's end. A span
// that begins at or after its paragraph's end is never shown: its text is left out.
//
// Times follow ttp:timeBase: "media" (the default) and "clock" as offsets, "smpte"
// with clock times with frames read as SMPTE timecodes (ttp:dropMode nonDrop,
// dropNTSC or dropPAL), counted at ttp:frameRate and converted at the effective rate
// (× ttp:frameRateMultiplier): 01:00:00:00 at 30 × 1000/1001 non-drop is 3603.6 s.
func parseTTML(s *source) []Cue {
	text := strings.Join(s.lines, "\n")
	d := xml.NewDecoder(strings.NewReader(text))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	// The bytes were decoded already (decodeAs); a declared encoding is what they were.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	lineOf := func(n int) int { return max(1, min(n, len(s.lines))) }
	pos := func() int {
		n, _ := d.InputPos()
		return lineOf(n)
	}
	b := cueBuilder{src: s}
	var rates ttmlRates
	agents := map[string]string{}
	styles := ttmlStyles{}
	var (
		stack     []ttmlNode
		names     []string
		cue       *ttmlCue
		agentID   string // the <ttm:agent> being read in the head
		inName    bool
		agentName strings.Builder
		root      bool
		// hidden is the depth inside metadata (ttmlMetadata): what it holds is
		// never shown, so it is neither text nor timing, whatever its elements are
		// named (foreign markup may have a p of its own).
		hidden int
	)
	for {
		// Where the token starts: a start tag's attributes may be on lines of their
		// own, and a cue is on the line of its "<p", a bad time on its attribute's.
		tagLine, _ := d.InputPos()
		tagOff := d.InputOffset()
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var se *xml.SyntaxError
			if errors.As(err, &se) {
				s.add(lineOf(se.Line), "script.ttml_syntax", se.Msg)
			} else {
				s.add(pos(), "script.ttml_syntax", err.Error())
			}
			return nil
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			names = append(names, name)
			if !root {
				root = true
				if name != "tt" {
					s.add(lineOf(tagLine), "script.ttml_root", name)
					return nil
				}
				var ok bool
				if rates, ok = ttmlRatesOf(t.Attr); !ok {
					s.add(lineOf(tagLine), "script.ttml_rates")
					return nil
				}
			}
			switch {
			case name == "agent" && cue == nil:
				agentID = ttmlAttr(t.Attr, "id")
			case name == "name" && agentID != "":
				inName = true
				agentName.Reset()
			}
			if hidden > 0 || ttmlMetadata(name) {
				hidden++
				continue
			}
			if name == "style" {
				styles.add(t.Attr)
			}
			if !ttmlTimed(name) {
				if name == "br" && cue != nil && (len(stack) == 0 || !stack[len(stack)-1].annotation) {
					cue.text.WriteByte('\n')
				}
				continue
			}
			parent := ttmlNode{}
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			tag := text[tagOff:min(d.InputOffset(), int64(len(text)))]
			n, ok := ttmlInterval(s, rates, parent, t.Attr, func(a xml.Attr) int { return lineOf(tagLine + ttmlAttrLine(tag, a)) })
			if !ok {
				n = parent
				n.seq = false
			}
			if name != "span" {
				n.inactive = false // a paragraph is a line, even one never shown
			}
			n.annotation, n.rubyFrame = parent.annotation, false
			if name == "span" {
				switch styles.ruby(t.Attr) {
				case "text", "textContainer", "delimiter":
					n.annotation = true
				case "container", "baseContainer":
					n.rubyFrame = true
				}
			}
			stack = append(stack, n)
			switch {
			case name == "p" && cue == nil:
				cue = &ttmlCue{line: lineOf(tagLine), begin: n.begin, end: n.end, hasEnd: n.hasEnd, agent: n.agent, own: n.timed, spanEnds: true}
				if !ok {
					cue.line = 0 // reported already
				}
			case name == "span" && cue != nil && n.timed && !n.inactive:
				if cue.spans == 0 || n.begin < cue.spanBegin {
					cue.spanBegin = n.begin
				}
				if cue.spans == 0 || n.end > cue.spanEnd {
					cue.spanEnd = n.end
				}
				cue.spanEnds = cue.spanEnds && n.hasEnd
				cue.spans++
			}
		case xml.EndElement:
			if len(names) == 0 {
				continue
			}
			name := names[len(names)-1]
			names = names[:len(names)-1]
			switch {
			case name == "name" && inName:
				inName = false
				if _, dup := agents[agentID]; !dup {
					agents[agentID] = canonName(agentName.String())
				}
			case name == "agent":
				agentID = ""
			}
			if hidden > 0 {
				hidden--
				continue
			}
			if !ttmlTimed(name) || len(stack) == 0 {
				continue
			}
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].seq {
				stack[len(stack)-1].cursor = max(n.end, n.begin)
			}
			if name == "p" && cue != nil {
				if !b.next(cue.line) {
					return b.cues
				}
				ttmlAddCue(s, &b, cue, agents)
				cue = nil
			}
		case xml.CharData:
			if inName {
				agentName.Write(t)
			}
			if top := len(stack) - 1; cue != nil && hidden == 0 && top >= 0 && !stack[top].inactive && !stack[top].annotation &&
				(!stack[top].rubyFrame || !xmlSpace(t)) {
				if stack[top].preserve {
					cue.text.Write(t)
				} else {
					cue.text.WriteString(strings.Map(func(r rune) rune {
						if r == '\n' || r == '\r' || r == '\t' {
							return ' '
						}
						return r
					}, string(t)))
				}
			}
		}
	}
	if !root {
		s.add(1, "script.ttml_root", "")
	}
	return b.cues
}

// xmlSpace reports whether text is XML white space only.
func xmlSpace(text []byte) bool {
	for _, c := range text {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// ttmlStyles are the document's <style> elements that say something about ruby, by
// xml:id: the tts:ruby each sets, and the styles each references in turn.
type ttmlStyles map[string]*ttmlStyle

type ttmlStyle struct {
	ruby     string
	hasRuby  bool
	refs     []string
	resolved bool // ruby is the style's own or that of what it references
	visiting bool // being resolved: a reference back to it is a cycle, and ignored
}

// add records a <style> element.
func (ss ttmlStyles) add(attrs []xml.Attr) {
	id := strings.TrimSpace(ttmlAttr(attrs, "id"))
	if id == "" {
		return
	}
	if _, dup := ss[id]; dup {
		return
	}
	st := &ttmlStyle{refs: strings.Fields(ttmlAttr(attrs, "style"))}
	for _, a := range attrs {
		if a.Name.Local == "ruby" {
			st.ruby, st.hasRuby = strings.TrimSpace(a.Value), true
		}
	}
	ss[id] = st
}

// ruby returns the tts:ruby of an element: its own attribute, else that of the styles
// it references (style="a b"), a later reference winning over an earlier one as in
// TTML's referential styling; "" for none.
func (ss ttmlStyles) ruby(attrs []xml.Attr) string {
	for _, a := range attrs {
		if a.Name.Local == "ruby" {
			return strings.TrimSpace(a.Value)
		}
	}
	return ss.refsRuby(strings.Fields(ttmlAttr(attrs, "style")))
}

func (ss ttmlStyles) refsRuby(refs []string) string {
	for i := len(refs) - 1; i >= 0; i-- {
		if r := ss.resolve(refs[i]); r != "" {
			return r
		}
	}
	return ""
}

// resolve returns the tts:ruby of the style id, computed once per style (a chain of
// references costs its length once, a cycle ends where it closes).
func (ss ttmlStyles) resolve(id string) string {
	st, ok := ss[id]
	if !ok || st.visiting {
		return ""
	}
	if !st.resolved {
		if !st.hasRuby {
			st.visiting = true
			st.ruby = ss.refsRuby(st.refs)
			st.visiting = false
		}
		st.resolved = true
	}
	return st.ruby
}

// ttmlTimed reports whether an element of TTML's body takes part in timing.
func ttmlTimed(name string) bool {
	switch name {
	case "tt", "body", "div", "p", "span":
		return true
	}
	return false
}

// ttmlMetadata reports whether an element is one of TTML's metadata elements, which
// body, div, p and span may hold as well as the head: <metadata> (with whatever
// foreign markup it carries) and the ttm: elements of its class.
func ttmlMetadata(name string) bool {
	switch name {
	case "metadata", "agent", "copyright", "desc", "title":
		return true
	}
	return false
}

// ttmlAttrLine returns the line of attribute a in tag, the source text of its start
// tag, counted from the tag's first line (0).
func ttmlAttrLine(tag string, a xml.Attr) int {
	for i := 0; ; {
		k := strings.Index(tag[i:], a.Name.Local)
		if k < 0 {
			return 0
		}
		at := i + k
		i = at + len(a.Name.Local)
		before, after := byte(' '), strings.TrimLeft(tag[i:], " \t\r\n")
		if at > 0 {
			before = tag[at-1]
		}
		if strings.ContainsRune(" \t\r\n:", rune(before)) && strings.HasPrefix(after, "=") {
			return strings.Count(tag[:at], "\n")
		}
	}
}

// ttmlAttr returns the value of the attribute with local name local, "" if none.
func ttmlAttr(attrs []xml.Attr, local string) string {
	for _, a := range attrs {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// ttmlInterval computes an element's absolute interval from its begin, end and dur,
// relative to its parent's begin (par) or its previous sibling's end (seq), and
// clipped to the parent's end. A bad time expression is reported on the line that
// lineOf gives its attribute.
func ttmlInterval(s *source, r ttmlRates, parent ttmlNode, attrs []xml.Attr, lineOf func(xml.Attr) int) (ttmlNode, bool) {
	base := parent.begin
	if parent.seq {
		base = parent.cursor
	}
	n := ttmlNode{begin: base, end: parent.end, hasEnd: parent.hasEnd, agent: parent.agent, preserve: parent.preserve,
		inactive: parent.inactive}
	var begin, end, dur time.Duration
	var hasBegin, hasEnd, hasDur bool
	for _, a := range attrs {
		var d *time.Duration
		var has *bool
		switch a.Name.Local {
		case "begin":
			d, has = &begin, &hasBegin
		case "end":
			d, has = &end, &hasEnd
		case "dur":
			d, has = &dur, &hasDur
		case "timeContainer":
			n.seq = strings.TrimSpace(a.Value) == "seq"
			continue
		case "agent":
			if f := strings.Fields(a.Value); len(f) > 0 {
				n.agent = f[0]
			}
			continue
		case "space":
			n.preserve = strings.TrimSpace(a.Value) == "preserve"
			continue
		default:
			continue
		}
		v, ok := r.time(a.Value)
		if !ok {
			s.add(lineOf(a), "script.ttml_bad_time", strings.TrimSpace(a.Value))
			return n, false
		}
		*d, *has = v, true
		n.timed = true
	}
	// Each time is at most MaxTimecode and a sum is held at ttmlTooLate, so that no
	// nesting of begins adds up past what a Duration holds (and wraps to a negative
	// time): a paragraph that late is refused (ttmlAddCue).
	if hasBegin {
		n.begin = min(base+begin, ttmlTooLate)
	}
	switch {
	case hasEnd && hasDur:
		n.end, n.hasEnd = min(base+end, n.begin+dur, ttmlTooLate), true
	case hasEnd:
		n.end, n.hasEnd = min(base+end, ttmlTooLate), true
	case hasDur:
		n.end, n.hasEnd = min(n.begin+dur, ttmlTooLate), true
	}
	if parent.hasEnd && n.hasEnd {
		n.end = min(n.end, parent.end)
	}
	// Never shown: begins after its parent's end, or at the end of a parent that lasts.
	if parent.hasEnd && n.timed && (n.begin > parent.end || n.begin == parent.end && parent.end > parent.begin) {
		n.inactive = true
	}
	if n.hasEnd && n.end < n.begin {
		n.end = n.begin
	}
	n.cursor = n.begin
	return n, true
}

// ttmlTooLate is where element times are held: past MaxTimecode, so refused.
const ttmlTooLate = MaxTimecode + time.Millisecond

// ttmlAddCue checks and keeps a paragraph read to its end.
func ttmlAddCue(s *source, b *cueBuilder, c *ttmlCue, agents map[string]string) {
	if c.line == 0 {
		return
	}
	if !c.own && c.spans > 0 {
		// Timing only on the spans: the paragraph is the line, from its first span's
		// begin to its last span's end.
		c.begin = c.spanBegin
		if c.spanEnds {
			c.end, c.hasEnd = c.spanEnd, true
		}
	}
	if !c.hasEnd {
		s.add(c.line, "script.ttml_no_end")
		return
	}
	if c.begin > MaxTimecode || c.end > MaxTimecode {
		s.add(c.line, "script.ttml_bad_time", FormatTimecode(c.end))
		return
	}
	raw := c.text.String()
	if r, ok := controlChar(strings.NewReplacer("\n", " ", "\t", " ").Replace(raw)); ok {
		s.add(c.line, "script.control_char", fmt.Sprintf("U+%04X", r))
		return
	}
	voice := agents[c.agent]
	var pl []plainLine
	for l := range strings.SplitSeq(raw, "\n") {
		// XML white space only: a no-break space (&nbsp;) is text.
		words := strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' })
		pl = append(pl, plainLine{text: strings.Join(words, " "), voice: voice})
	}
	character, text := cueText(pl)
	b.add(c.line, Cue{SourceLine: c.line, Start: c.begin, End: c.end, Character: character, Text: text})
}
