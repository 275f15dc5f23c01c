// Package studio is dubstudio's domain: users, projects, characters, timed lines and
// their history, with the store functions that read and write them in Postgres.
package studio

import "errors"

// Category sentinels. Typed errors unwrap to one of these, and the web layer maps each
// to an HTTP status in one place.
var (
	ErrNotFound  = errors.New("not found")
	ErrInvalid   = errors.New("invalid")
	ErrForbidden = errors.New("forbidden")
	ErrConflict  = errors.New("conflict")
)
