// Package httpjson writes the gateway's own JSON answers: the web chat's,
// the dashboard's and the OpenAI-compatible API's.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers v as JSON with status code. The answer is never cached:
// it is a user's conversation, a model's answer or the fleet's state.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
