// Package blobhash names audio blobs: the hex SHA-256 of their bytes. It imports only
// the standard library, so that the engines (package tts) can name a reference
// recording as the blob store does without importing the store, its database
// driver and gorm.
package blobhash

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// File returns the name of the blob whose bytes are the file at path.
func File(path string) (string, error) {
	sum, _, err := FileSize(path)
	return sum, err
}

// FileSize returns File's name and the file's size, reading the file once.
func FileSize(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Bytes returns the name of the blob whose bytes are b.
func Bytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
