package approvals

import (
	"crypto/rand"
	_ "embed"
	"net/http"
	"strings"
)

// pageTemplate is the approval page. It is self-contained (inline CSS and
// JS, no external assets) and renders untrusted data only through
// textContent. nonceMark is replaced by a fresh CSP nonce per response.
//
//go:embed ui.html
var pageTemplate string

const nonceMark = "__CSP_NONCE__"

// servePage writes the approval page under a strict CSP: only this
// response's nonced <style> and <script> run, and fetch may reach only
// this origin.
func servePage(w http.ResponseWriter) {
	nonce := rand.Text() // base32: valid nonce characters
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'nonce-"+nonce+"'; style-src 'self' 'nonce-"+nonce+
		"'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(strings.ReplaceAll(pageTemplate, nonceMark, nonce)))
}
