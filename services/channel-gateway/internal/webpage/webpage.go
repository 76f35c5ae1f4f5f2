// Package webpage serves the gateway's own pages, the web chat's and the
// dashboard's: an index behind the web chat's login, from embedded files,
// never cached nor framed.
package webpage

import (
	"io/fs"
	"net/http"
)

// Gate is the login the pages are behind: the web chat's server.
type Gate interface {
	// Authorized reports whether r carries the login.
	Authorized(r *http.Request) bool
	// LogIn checks a login link's token and, when it is right, sets the
	// login cookie on w.
	LogIn(w http.ResponseWriter, r *http.Request, token string) bool
}

// Index serves index.html of Files to a logged-in browser and
// login.html to others; a request with a login link's token logs
// in and is redirected to Home, which drops the token from the address
// bar.
type Index struct {
	Files fs.FS
	Gate  Gate
	Home  string
	// CSP is the pages' Content-Security-Policy.
	CSP string
}

func (x Index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		if !x.Gate.LogIn(w, r, tok) {
			x.page(w, "login.html", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, x.Home, http.StatusSeeOther)
		return
	}
	if !x.Gate.Authorized(r) {
		x.page(w, "login.html", http.StatusOK)
		return
	}
	x.page(w, "index.html", http.StatusOK)
}

func (x Index) page(w http.ResponseWriter, name string, code int) {
	data, err := fs.ReadFile(x.Files, name)
	if err != nil {
		http.Error(w, "missing page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", x.CSP)
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
