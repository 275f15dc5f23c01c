// Package i18n is dubstudio's message catalog: every piece of text a user sees goes
// through T, in English or Simplified Chinese.
//
// Messages are kept in Go maps, one file per area of the product (messages_*.go), all
// merged into one catalog at start-up; a key defined twice panics, and a test checks
// that every key has both languages and the same placeholders in each.
package i18n

import (
	"fmt"
	"strings"

	"golang.org/x/text/language"
)

// Lang is a supported interface language.
type Lang string

const (
	EN Lang = "en"
	ZH Lang = "zh"
)

// Langs lists the supported languages, the default first.
var Langs = []Lang{EN, ZH}

// Message is one catalog entry. Placeholders use fmt verbs, in the same order in both.
//
// A message with a count has the English singular in One ("Queued %d line."), used
// when the count is 1; Chinese has no plural. The count is the argument at position
// Count (from 1), or the first integer argument where Count is 0.
type Message struct {
	EN    string
	ZH    string
	One   string
	Count int
}

// count returns the message's count among args, and whether there is one.
func (m Message) count(args []any) (int64, bool) {
	if m.Count > 0 {
		if m.Count > len(args) {
			return 0, false
		}
		return integer(args[m.Count-1])
	}
	for _, a := range args {
		if n, ok := integer(a); ok {
			return n, true
		}
	}
	return 0, false
}

// integer reads a whole number: any integer type, or a whole float64 (a count read
// back from JSON).
func integer(a any) (int64, bool) {
	switch v := a.(type) {
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		return int64(v), true //nolint:gosec // counts are small
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	}
	return 0, false
}

var catalog = map[string]Message{}

func register(area map[string]Message) {
	for k, m := range area {
		if _, dup := catalog[k]; dup {
			panic("i18n: message " + k + " defined twice")
		}
		catalog[k] = m
	}
}

// T returns the message key in lang, formatted with args. An unknown key is returned
// as is, wrapped in brackets so that it is noticed.
func T(lang Lang, key string, args ...any) string {
	m, ok := catalog[key]
	if !ok {
		return "[" + key + "]"
	}
	s := m.EN
	if lang == ZH && m.ZH != "" {
		s = m.ZH
	} else if m.One != "" {
		if n, ok := m.count(args); ok && n == 1 {
			s = m.One
		}
	}
	if len(args) == 0 {
		return s
	}
	return fmt.Sprintf(s, args...)
}

// Has reports whether key is in the catalog.
func Has(key string) bool { _, ok := catalog[key]; return ok }

// Keys returns every key in the catalog, for tests.
func Keys() []string {
	out := make([]string, 0, len(catalog))
	for k := range catalog {
		out = append(out, k)
	}
	return out
}

// Lookup returns the raw entry for key.
func Lookup(key string) (Message, bool) { m, ok := catalog[key]; return m, ok }

var matcher = language.NewMatcher([]language.Tag{language.English, language.SimplifiedChinese})

// Parse turns a stored preference ("en", "zh") into a Lang; ok is false for anything else.
func Parse(s string) (Lang, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "en":
		return EN, true
	case "zh":
		return ZH, true
	}
	return "", false
}

// FromAcceptLanguage picks the best language for an Accept-Language header.
func FromAcceptLanguage(header string) Lang {
	tags, _, err := language.ParseAcceptLanguage(header)
	if err != nil || len(tags) == 0 {
		return EN
	}
	_, idx, conf := matcher.Match(tags...)
	if conf == language.No || idx != 1 {
		return EN
	}
	return ZH
}

// Error is an error whose text is a catalog message, so that it can be shown to a user
// in their language. Err, when set, is what it unwraps to (a category sentinel).
type Error struct {
	Key  string
	Args []any
	Err  error
}

func (e *Error) Error() string { return T(EN, e.Key, e.Args...) }
func (e *Error) Unwrap() error { return e.Err }

// In returns the error's text in lang.
func (e *Error) In(lang Lang) string { return T(lang, e.Key, e.Args...) }

// Errorf makes an Error that unwraps to sentinel.
func Errorf(sentinel error, key string, args ...any) *Error {
	return &Error{Key: key, Args: args, Err: sentinel}
}
