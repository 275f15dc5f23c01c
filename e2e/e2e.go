// Package e2e drives the running app in real headless Chromium (chromedp): the tests
// log in, click and type as a person would, and save screenshots under
// e2e/artifacts/ as test artefacts.
package e2e
