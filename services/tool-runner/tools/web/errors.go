package web

import "errors"

// ErrSearch: the search provider failed.
var ErrSearch = errors.New("web search failed")

// ErrHTTP: the server answered with an error status.
var ErrHTTP = errors.New("http error")
