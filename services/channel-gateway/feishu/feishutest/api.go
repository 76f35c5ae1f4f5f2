package feishutest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.Recorder.Add(Call{Kind: "token"})
	if !strings.HasPrefix(req.AppID, "cli_") || req.AppSecret != AppSecret {
		writeJSON(w, http.StatusOK, map[string]any{"code": 10014, "msg": "app secret invalid"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})
}

// api serves one open API method, checking the tenant token.
func (s *Server) api(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 99991663, "msg": "Invalid access token for authorization"})
			return
		}
		c := Call{Kind: kind, Parent: r.PathValue("id"), Query: map[string]string{}, Body: map[string]any{}, At: s.Stamp.Now()}
		for k, v := range r.URL.Query() {
			c.Query[k] = v[0]
		}
		if r.Method == http.MethodPost || r.Method == http.MethodPatch {
			raw, err := io.ReadAll(r.Body)
			if err == nil {
				err = json.Unmarshal(raw, &c.Body)
			}
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 9499, "msg": "bad json: " + err.Error()})
				return
			}
			c.Size = len(raw)
		}
		s.mu.Lock()
		f := s.Script.Take(kind)
		uuid := c.Str("uuid")
		if f == nil && uuid != "" {
			c.Duplicate = s.seen[uuid]
			s.seen[uuid] = true
		}
		s.msgs++
		id := fmt.Sprintf("om_%d", s.msgs)
		data, found := s.resources[c.Parent+"/"+r.PathValue("key")]
		_, exists := s.contents[c.Parent]
		s.mu.Unlock()
		if kind == "create" || kind == "reply" {
			c.ID = id
		}
		c.TooLong = f == nil && tooLong(kind, c)
		// Recorded once handled, so a test that saw the call reads the
		// state it left (Content after a patch).
		defer s.Recorder.Add(c)
		if f != nil {
			f.write(w)
			return
		}
		if c.TooLong {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230025, "msg": "The length of the message content reaches its limit."})
			return
		}
		switch kind {
		case "botinfo":
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "ok", "bot": map[string]any{
				"activate_status": 2, "app_name": "nano", "open_id": BotOpenID,
			}})
		case "patch":
			if !exists || !strings.Contains(c.Str("content"), `"update_multi":true`) {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "message not found or not an updatable card"})
				return
			}
			s.mu.Lock()
			s.contents[c.Parent] = c.Str("content")
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
		case "delete":
			if !exists {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "message not found"})
				return
			}
			s.mu.Lock()
			delete(s.contents, c.Parent)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{}})
		case "create", "reply":
			if kind == "create" && c.Query["receive_id_type"] != "chat_id" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid receive_id_type"})
				return
			}
			var probe map[string]any
			if err := json.Unmarshal([]byte(c.Str("content")), &probe); err != nil || c.Str("msg_type") == "" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid content"})
				return
			}
			if t := c.Str("msg_type"); t == "image" || t == "file" {
				key, _ := probe[t+"_key"].(string)
				s.mu.Lock()
				_, uploaded := s.uploads[key]
				s.mu.Unlock()
				if !uploaded {
					writeJSON(w, http.StatusBadRequest, map[string]any{"code": 230001, "msg": "invalid " + t + "_key"})
					return
				}
			}
			s.mu.Lock()
			s.contents[id] = c.Str("content")
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]any{
				"message_id": id, "chat_id": c.Str("receive_id"), "msg_type": c.Str("msg_type"),
			}})
		case "resource":
			if !found {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 234003, "msg": "file not found"})
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("key")+`.bin"`)
			s.serve(w, c.Parent+"/"+r.PathValue("key"), data)
		}
	}
}

// Request body limits of sending, replying to and updating a message:
// 150 KB for a text message, 30 KB for a card or post; the platform
// answers a longer one with code 230025
// (https://open.feishu.cn/document/server-docs/im-v1/message/create).
const (
	MaxTextBody = 150 << 10
	MaxCardBody = 30 << 10
)

// tooLong reports whether a message sent, replied or updated by c is over
// the limits.
func tooLong(kind string, c Call) bool {
	switch {
	case kind == "patch":
		return c.Size > MaxCardBody
	case kind != "create" && kind != "reply":
		return false
	case c.Str("msg_type") == "text":
		return c.Size > MaxTextBody
	}
	return c.Size > MaxCardBody
}

// Upload limits of the platform.
const (
	ImageLimit = 10 << 20
	FileLimit  = 30 << 20
)

// serveUpload serves im/v1/images (kind "image") or im/v1/files ("file"):
// a multipart form with the bytes in the part named kind, refused when
// empty, over limit or without the fields the platform requires.
func (s *Server) serveUpload(kind string, limit int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 99991663, "msg": "Invalid access token for authorization"})
			return
		}
		if err := r.ParseMultipartForm(int64(limit) + 1<<20); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": 9499, "msg": "bad multipart form: " + err.Error()})
			return
		}
		c := Call{Kind: kind, Query: map[string]string{}, Body: map[string]any{}, At: time.Now()}
		for k, v := range r.MultipartForm.Value {
			c.Body[k] = v[0]
		}
		file, _, ferr := r.FormFile(kind)
		if ferr == nil {
			c.Upload, ferr = io.ReadAll(file)
			file.Close()
		}
		refusal := Failure{Code: 234001, Msg: "invalid request param"}
		s.mu.Lock()
		f := s.Script.Take(kind)
		switch {
		case f != nil:
			refusal = *f
		case ferr != nil:
		case len(c.Upload) == 0:
			refusal.Code, refusal.Msg = 234010, "file size can't be 0"
		case len(c.Upload) > limit:
			refusal.Code, refusal.Msg = 234006, "file size exceeds the limit"
		case kind == "image" && c.Str("image_type") != "message":
		case kind == "file" && (c.Str("file_type") == "" || c.Str("file_name") == ""):
		default:
			s.msgs++
			c.Key = fmt.Sprintf("%s_v3_%d", kind, s.msgs)
			s.uploads[c.Key] = c.Upload
		}
		s.mu.Unlock()
		s.Recorder.Add(c)
		if c.Key == "" {
			refusal.write(w)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"code": 0, "msg": "success", "data": map[string]string{kind + "_key": c.Key}})
	}
}

// Uploaded returns the bytes uploaded under an image or file key, or nil.
func (s *Server) Uploaded(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uploads[key]
}

// write answers with the failure.
func (f Failure) write(w http.ResponseWriter) {
	if f.Reset > 0 {
		w.Header().Set("x-ogw-ratelimit-reset", strconv.Itoa(f.Reset))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, map[string]any{"code": f.Code, "msg": f.Msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// serve writes a resource in pieces, counting what the client took.
func (s *Server) serve(w http.ResponseWriter, key string, data []byte) {
	for len(data) > 0 {
		n, err := w.Write(data[:min(len(data), 64<<10)])
		s.mu.Lock()
		s.served[key] += int64(n)
		s.mu.Unlock()
		if err != nil {
			return
		}
		data = data[n:]
	}
}
