package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// The request parsing that runs before a handler, fuzzed (issue 17): the login
// redirect, the CSRF token read from a multipart body, the text checks and the client
// address. scripts/fuzz.sh runs every target; the seeds run with go test.

// A redirect after login never leaves the site, whatever next is.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/projects/1", "//evil.example", "/\t/evil.example", "/\\evil.example", "https://evil.example/",
		"/%2F%2Fevil.example", "/ok?x=//y#z", "", "/", "javascript:alert(1)", "/\x7f", "/a/../..//b"} {
		f.Add(s)
	}
	base, err := url.Parse("https://studio.example/login")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != next && got != "/projects" {
			t.Fatalf("safeNext(%q) = %q: neither the path nor the default", next, got)
		}
		u, err := base.Parse(got)
		if err != nil {
			t.Fatalf("safeNext(%q) = %q, which does not parse: %v", next, got, err)
		}
		if u.Scheme != "https" || u.Host != "studio.example" {
			t.Fatalf("safeNext(%q) = %q leads to %s://%s", next, got, u.Scheme, u.Host)
		}
		// A browser drops tabs and newlines from URLs and reads a backslash as a slash.
		loose := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(got)
		if strings.HasPrefix(loose, "//") {
			t.Fatalf("safeNext(%q) = %q, which a browser reads as another host", next, got)
		}
	})
}

// The CSRF token is read from a multipart body without losing a byte of it for the
// handler, whatever the body and its boundary.
func FuzzFormToken(f *testing.F) {
	f.Add("b", "--b\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\ntok\r\n--b\r\n"+
		"Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\r\n--b--\r\n")
	f.Add("x", "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"+strings.Repeat("a", 70<<10))
	f.Add("", "")
	f.Add("b", "--b\r\n\r\n--b--")
	f.Fuzz(func(t *testing.T, boundary, body string) {
		r := httptest.NewRequest(http.MethodPost, "/projects/1/source", strings.NewReader(body))
		r.Header.Set(echo.HeaderContentType, "multipart/form-data; boundary="+boundary)
		token := formToken(r)
		if len(token) > 256 {
			t.Fatalf("token of %d bytes", len(token))
		}
		rest, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rest, []byte(body)) {
			t.Fatalf("the handler would read %d bytes of a %d-byte body", len(rest), len(body))
		}
	})
}

// What validJSONText lets through decodes to text Postgres takes: valid UTF-8, no NUL.
func FuzzValidJSONText(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"a":"\u0000"}`, `{"a":"\\u0000"}`, `["\U0000"]`, "{\"a\":\"\x00\"}",
		`"\ud800"`, `{"\u0000":1}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !validJSONText(body) {
			return
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if strings.ContainsRune(x, 0) || !utf8.ValidString(x) {
					t.Fatalf("%q passed and decodes to %q", body, x)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}

// validText refuses exactly the form values (and names) that are not valid UTF-8 or
// hold a NUL.
func FuzzValidText(f *testing.F) {
	f.Add("name", "Alice")
	f.Add("text", "a\x00b")
	f.Add("n\xff", "ok")
	f.Fuzz(func(t *testing.T, key, value string) {
		ok := utf8.ValidString(key) && utf8.ValidString(value) && !strings.ContainsRune(key+value, 0)
		if got := validText(url.Values{key: {value}}); got != ok {
			t.Fatalf("validText(%q: %q) = %v, want %v", key, value, got, ok)
		}
	})
}

// The client address is the connection's unless the connection comes from a trusted
// proxy: a client cannot pick its own address with X-Forwarded-For.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.7:5000", "198.51.100.1")
	f.Add("10.0.0.2:80", "198.51.100.1, 10.0.0.3")
	f.Add("127.0.0.1:1", "1.2.3.4")
	f.Add("[2001:db8::1]:443", "::1")
	_, proxies, err := net.ParseCIDR("10.0.0.0/8")
	if err != nil {
		f.Fatal(err)
	}
	direct, trusted := clientIP(nil), clientIP([]*net.IPNet{proxies})
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.RemoteAddr = remote
		r.Header.Set(echo.HeaderXForwardedFor, xff)
		host, _, err := net.SplitHostPort(remote)
		if err != nil {
			return // net/http always sets a connection's host:port
		}
		if got := direct(r); !sameIP(got, host) {
			t.Fatalf("without trusted proxies, %q from %q gave %q", xff, remote, got)
		}
		if ip := net.ParseIP(host); ip != nil && !proxies.Contains(ip) {
			if got := trusted(r); !sameIP(got, host) {
				t.Fatalf("an untrusted %q with X-Forwarded-For %q gave %q", remote, xff, got)
			}
		}
	})
}

// sameIP: the same text, or the same address written another way ("0::" and "::").
func sameIP(a, b string) bool {
	if a == b {
		return true
	}
	x, y := net.ParseIP(a), net.ParseIP(b)
	return x != nil && x.Equal(y)
}
