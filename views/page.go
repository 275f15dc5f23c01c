// Package views holds dubstudio's templ components: whole pages and the fragments
// htmx swaps in. Components get a Page with what every page shows (user, language,
// CSRF token) and a view model with only what they display.
package views

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"dubstudio/i18n"
	"dubstudio/studio"
)

// Page is what every page needs.
type Page struct {
	Lang  i18n.Lang
	User  *studio.User // nil on the login page
	CSRF  string
	Title string
	Nav   string // the active navigation entry
	Flash string // a message shown once at the top
}

// T translates key in the page's language.
func (p Page) T(key string, args ...any) string { return i18n.T(p.Lang, key, args...) }

// Can reports whether the user's role includes least.
func (p Page) Can(least studio.Role) bool { return p.User != nil && p.User.Role.AtLeast(least) }

// CSRFHeaders is the hx-headers value that makes htmx send the token on every request.
func (p Page) CSRFHeaders() string {
	return fmt.Sprintf(`{"X-CSRF-Token": %q}`, p.CSRF)
}

// Timecode formats milliseconds as HH:MM:SS.mmm.
func Timecode(ms int) string {
	d := time.Duration(ms) * time.Millisecond
	h := int(d / time.Hour)
	m := int(d/time.Minute) % 60
	s := int(d/time.Second) % 60
	return fmt.Sprintf("%02d:%02d:%02d.%03d", h, m, s, ms%1000)
}

// Seconds formats milliseconds as seconds with one decimal.
func Seconds(ms int) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + " s" }

func itoa[T ~int | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func idURL(format string, ids ...any) string { return fmt.Sprintf(format, ids...) }

// liveURL is a project page's event stream, with the live mark taken before the page
// read its lines (web's streamEvents resyncs when it has changed).
func liveURL(projectID int64, mark string) string {
	return query(idURL("/projects/%d/events", projectID), "mark", mark)
}

func query(base string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" && kv[i+1] != "0" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return base
	}
	return base + "?" + v.Encode()
}
