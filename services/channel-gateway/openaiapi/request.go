package openaiapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// chatRequest is the part of a chat completion request the fleet uses.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		// IncludeUsage asks for a last chunk with the turn's usage.
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// maxBodyBytes bounds a request body: a message at the gateway's limit,
// JSON-escaped, with the client's copy of the conversation around it.
const maxBodyBytes = 4 << 20

// bodyError says what is wrong with a request body in the API's terms:
// decoding errors name Go types ("Go struct field chatRequest.messages of
// type []struct {…}"), which mean nothing to a client.
func bodyError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		want := "a " + typeErr.Type.Kind().String()
		switch typeErr.Type.Kind() {
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Int, reflect.Int64, reflect.Float64:
			want = "a number"
		case reflect.Interface:
			want = "a value"
		}
		field := typeErr.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("Invalid type for '%s': expected %s, but got %s.", field, want, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("The request body is not valid JSON (at byte %d): %v.", syntaxErr.Offset, syntaxErr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "The request body is empty or cut short; send a JSON object."
	}
	return "The request body is not valid JSON: " + err.Error()
}

// lastUserText returns the text of the request's last user message, whose
// content is a string or an array of parts.
func (r *chatRequest) lastUserText() (string, error) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		var text string
		if err := json.Unmarshal(m.Content, &text); err == nil {
			return text, nil
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return "", fmt.Errorf("%w: messages[%d].content must be a string or an array of parts", errBadRequest, i)
		}
		var b []string
		for _, p := range parts {
			if p.Type == "text" {
				b = append(b, p.Text)
			}
		}
		return strings.Join(b, "\n"), nil
	}
	return "", fmt.Errorf("%w: messages must contain a user message", errBadRequest)
}
