package discordtest

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/gateway":
		s.gateway(w, r)
		return
	case strings.HasPrefix(r.URL.Path, "/cdn/"):
		s.files.Serve(w, r, strings.TrimPrefix(r.URL.Path, "/cdn/"))
		return
	}
	if r.Header.Get("Authorization") != "Bot "+s.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v10")
	if !ok {
		http.NotFound(w, r)
		return
	}
	seg := strings.Split(strings.Trim(path, "/"), "/")
	call := Call{At: time.Now()}
	switch {
	case r.Method == http.MethodGet && path == "/gateway/bot":
		writeJSON(w, http.StatusOK, map[string]any{
			"url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/gateway", "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
		})
		return
	case r.Method == http.MethodGet && path == "/users/@me":
		writeJSON(w, http.StatusOK, s.user())
		return
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPost:
		call.Route, call.ChannelID = "POST /channels/{id}/messages", seg[1]
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodPatch:
		call.Route, call.ChannelID, call.MessageID = "PATCH /channels/{id}/messages/{id}", seg[1], seg[3]
	case len(seg) == 4 && seg[0] == "channels" && seg[2] == "messages" && r.Method == http.MethodDelete:
		call.Route, call.ChannelID, call.MessageID = "DELETE /channels/{id}/messages/{id}", seg[1], seg[3]
	case len(seg) == 3 && seg[0] == "channels" && seg[2] == "typing" && r.Method == http.MethodPost:
		call.Route, call.ChannelID = "POST /channels/{id}/typing", seg[1]
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
		return
	}
	if err := readBody(r, &call); err != nil {
		call.Status = http.StatusBadRequest
		s.Recorder.Add(call)
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body: " + err.Error(), "code": 50035})
		return
	}
	if f := s.Script.Take(call.Route); f != nil {
		call.Status = f.Status
		s.Recorder.Add(call)
		writeFailure(w, *f)
		return
	}
	rateHeaders(w.Header(), 49)
	switch call.Route {
	case "POST /channels/{id}/typing":
		call.Status = http.StatusNoContent
		s.Recorder.Add(call)
		w.WriteHeader(http.StatusNoContent)
		return
	case "DELETE /channels/{id}/messages/{id}":
		s.mu.Lock()
		_, ok := s.texts[call.MessageID]
		delete(s.texts, call.MessageID)
		s.deleted = append(s.deleted, call.MessageID)
		s.mu.Unlock()
		call.Status = http.StatusNoContent
		if !ok {
			call.Status = http.StatusNotFound
		}
		s.Recorder.Add(call)
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008})
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	content := call.Content()
	if len([]rune(content)) > 2000 {
		call.Status = http.StatusBadRequest
		s.Recorder.Add(call)
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
			"errors": map[string]any{"content": map[string]any{"_errors": []any{map[string]any{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}}})
		return
	}
	s.mu.Lock()
	id := call.MessageID
	nonce, _ := call.Body["nonce"].(string)
	enforce, _ := call.Body["enforce_nonce"].(bool)
	if id == "" && enforce && nonce != "" && s.nonces[call.ChannelID+"/"+nonce] != "" {
		id, call.Duplicate = s.nonces[call.ChannelID+"/"+nonce], true
		content = s.texts[id]
	} else if id == "" {
		s.nextID++
		id = strconv.FormatInt(s.nextID, 10)
		if enforce && nonce != "" {
			s.nonces[call.ChannelID+"/"+nonce] = id
		}
		call.MessageID = id
		call.Status = http.StatusOK
		s.created = append(s.created, call)
	} else if _, ok := s.texts[id]; !ok {
		s.mu.Unlock()
		call.Status = http.StatusNotFound
		s.Recorder.Add(call)
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Unknown Message", "code": 10008})
		return
	}
	s.texts[id] = content
	s.mu.Unlock()
	call.Status = http.StatusOK
	s.Recorder.Add(call)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "channel_id": call.ChannelID, "content": content, "type": 0,
		"author": s.user(), "mentions": []any{}, "attachments": []any{}, "embeds": []any{}, "mention_roles": []any{},
		"timestamp": time.Now().UTC().Format(time.RFC3339), "tts": false, "pinned": false, "mention_everyone": false,
	})
}

func (s *Server) user() map[string]any {
	return map[string]any{"id": s.BotID, "username": s.BotName, "global_name": s.BotName, "bot": true, "discriminator": s.BotDiscriminator}
}

// readBody decodes a JSON or multipart (payload_json + files[n]) body.
func readBody(r *http.Request, c *Call) error {
	c.Body = map[string]any{}
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		data, err := io.ReadAll(r.Body)
		if err != nil || len(data) == 0 {
			return err
		}
		return json.Unmarshal(data, &c.Body)
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	c.Files = map[string][]byte{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		if p.FormName() == "payload_json" {
			if err := json.Unmarshal(data, &c.Body); err != nil {
				return err
			}
			continue
		}
		c.Files[p.FileName()] = data
	}
}

// rateHeaders are the bucket headers Discord sends on every answer.
func rateHeaders(h http.Header, remaining int) {
	h.Set("X-RateLimit-Bucket", "fakebucket")
	h.Set("X-RateLimit-Limit", "50")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset-After", "1.000")
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(time.Now().Add(time.Second).UnixMilli())/1000, 'f', 3, 64))
	h.Set("Via", "1.1 google")
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.Status == http.StatusTooManyRequests {
		secs := f.RetryAfter.Seconds()
		rateHeaders(w.Header(), 0)
		w.Header().Set("Retry-After", strconv.Itoa(int(secs+0.999)))
		w.Header().Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		w.Header().Set("X-RateLimit-Scope", "user")
		writeJSON(w, f.Status, map[string]any{"message": f.Message, "retry_after": secs, "global": false})
		return
	}
	writeJSON(w, f.Status, map[string]any{"message": f.Message, "code": f.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
