package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
)

// readyInfo is what `serve` tells the person who started it, once it is listening.
type readyInfo struct {
	BaseURL     string
	DemoProject int64  // the demo project's ID; 0 when there is none
	Admin       string // the first admin's user name; "" when there is none
	Password    string // the admin's password, on the run that created the admin only
	DatabaseURL string // for the command that sets a new password
	Command     string // how this binary was invoked (os.Args[0])
}

// writeReady prints the block `serve` ends its start-up with: where to open the app,
// who to sign in as (the password on the first run only), how to set a new password and
// how to stop. It is the last thing printed, so that it is not lost among the logs.
func writeReady(w io.Writer, r readyInfo) error {
	open := r.BaseURL + "/projects"
	if r.DemoProject != 0 {
		open = r.BaseURL + "/projects/" + strconv.FormatInt(r.DemoProject, 10) + "  (the demo project)"
	}
	var b strings.Builder
	b.WriteString("\n  dubstudio is ready.\n")
	fmt.Fprintf(&b, "    Open:          %s\n", open)
	if r.Admin != "" {
		fmt.Fprintf(&b, "    User:          %s\n", r.Admin)
		if r.Password != "" {
			fmt.Fprintf(&b, "    Password:      %s  (shown this once)\n", r.Password)
		}
		fmt.Fprintf(&b, "    New password:  DATABASE_URL='%s' %s user reset-password %s\n", redactedURL(r.DatabaseURL), r.Command, r.Admin)
	}
	b.WriteString("    Stop:          Ctrl+C\n\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// redactedURL hides a password in a database URL: the console is no place for it.
func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "…"
	}
	return u.Redacted()
}
