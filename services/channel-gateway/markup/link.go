package markup

import "strings"

// linkSchemes are the only URL schemes a rendered link may carry: the
// others (javascript:, data:, vbscript:, file:, custom app schemes) either
// run code in the reader's page or hand the click to a program the reader
// did not choose.
var linkSchemes = map[string]bool{"http": true, "https": true, "mailto": true}

// scheme returns the URL's scheme as a browser determines it (WHATWG URL
// parsing): leading and trailing C0 controls and spaces are ignored, tabs
// and line breaks anywhere are removed, and a scheme is a letter followed
// by letters, digits, '+', '-' or '.' up to the first ':'. It returns ""
// for a relative URL.
func scheme(url string) string {
	url = strings.TrimFunc(url, func(r rune) bool { return r <= ' ' })
	url = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(url)
	for i := 0; i < len(url); i++ {
		c := url[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(url[:i])
		default:
			return ""
		}
	}
	return ""
}

// absoluteSafe reports whether url is an absolute link with a safe scheme:
// the only links a chat platform, which has no page to resolve a relative
// link against, is given.
func absoluteSafe(url string) bool { return linkSchemes[scheme(url)] }

// relativeOrSafe reports whether url is relative or has a safe scheme: the
// links the web chat's page may carry.
func relativeOrSafe(url string) bool {
	s := scheme(url)
	return s == "" || linkSchemes[s]
}
