package dingtalktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func (s *Server) serveOpen(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ClientID      string `json:"clientId"`
		ClientSecret  string `json:"clientSecret"`
		Subscriptions []struct{ Type, Topic string }
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ClientID != ClientID || req.ClientSecret != ClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": "InvalidAuthentication", "message": "bad client credentials"})
		return
	}
	bot := false
	for _, sub := range req.Subscriptions {
		bot = bot || (sub.Type == "CALLBACK" && sub.Topic == "/v1.0/im/bot/messages/get")
	}
	if !bot {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter", "message": "no robot subscription"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": "ws" + strings.TrimPrefix(s.URL, "http") + "/stream", "ticket": "ticket-1"})
}

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") != "ticket-1" {
		http.Error(w, "bad ticket", http.StatusForbidden)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer s.Link.Open(c)()
	for {
		_, data, err := c.Read(r.Context())
		if err != nil {
			return
		}
		var resp struct {
			Code    int               `json:"code"`
			Headers map[string]string `json:"headers"`
			Data    string            `json:"data"`
		}
		if json.Unmarshal(data, &resp) == nil {
			s.acks.Add(Ack{MessageID: resp.Headers["messageId"], Code: resp.Code, Data: resp.Data})
		}
	}
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	var req struct{ AppKey, AppSecret string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.Recorder.Add(Call{Kind: "token"})
	if req.AppKey != ClientID || req.AppSecret != ClientSecret {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidClientIdOrSecret", "message": "bad app key or secret"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"accessToken": token, "expireIn": 7200})
}

func (f *Failure) write(w http.ResponseWriter) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	if f.ErrCode != 0 {
		writeJSON(w, status, map[string]any{"errcode": f.ErrCode, "errmsg": "scripted failure"})
		return
	}
	writeJSON(w, status, map[string]any{"code": f.Code, "message": "scripted failure"})
}

func (s *Server) api(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-acs-dingtalk-access-token") != token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"code": "InvalidAuthentication", "message": "no valid token"})
			return
		}
		c := Call{Kind: kind, Body: map[string]any{}, At: s.Stamp.Now()}
		if err := json.NewDecoder(r.Body).Decode(&c.Body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter", "message": err.Error()})
			return
		}
		f := s.Script.Take(kind)
		card := kind == "cardcreate" || kind == "cardstream"
		if card && f == nil {
			// Recorded once the card holds it, so a test that saw the
			// call reads the card it left.
			s.serveCard(w, c)
			s.Recorder.Add(c)
			return
		}
		s.Recorder.Add(c) // before a hold, so a test sees the call it holds
		if f != nil && !f.held() {
			f.write(w)
			return
		}
		if card {
			s.serveCard(w, c)
			return
		}
		if c.Str("robotCode") != ClientID {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter.robotCode", "message": "unknown robot"})
			return
		}
		switch kind {
		case "otosend", "groupsend":
			var p map[string]string
			if json.Unmarshal([]byte(c.Str("msgParam")), &p) != nil || c.Str("msgKey") == "" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter.msgParam", "message": "bad msgParam"})
				return
			}
			if msg := s.checkMedia(c.Str("msgKey"), p); msg != "" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter.msgParam", "message": msg})
				return
			}
			if kind == "groupsend" && !strings.HasPrefix(c.Str("openConversationId"), "cid") {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": "invalidParameter.openConversationId", "message": "bad conversation"})
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"processQueryKey": "pq-1", "invalidStaffIdList": []string{}, "flowControlledStaffIdList": []string{}})
		case "download":
			writeJSON(w, http.StatusOK, map[string]any{"downloadUrl": s.URL + "/files/" + c.Str("downloadCode")})
		}
	}
}

// serveUpload serves media/upload: access_token and type (image, file,
// voice, video) in the query, the bytes in the multipart part "media";
// it answers errcode and media_id as the oapi does.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("access_token") != token {
		writeJSON(w, http.StatusOK, map[string]any{"errcode": 40014, "errmsg": "invalid access_token"})
		return
	}
	c := Call{Kind: "upload", Body: map[string]any{"type": r.URL.Query().Get("type")}}
	var errcode int
	var errmsg string
	if err := r.ParseMultipartForm(MediaLimit + 1<<20); err != nil {
		errcode, errmsg = 40035, "bad multipart form: "+err.Error()
	} else if f, h, err := r.FormFile("media"); err != nil {
		errcode, errmsg = 41001, "no media part"
	} else {
		c.Body["filename"] = h.Filename
		c.Upload, _ = io.ReadAll(f)
		f.Close()
	}
	s.mu.Lock()
	fail := s.Script.Take("upload")
	switch t := c.Str("type"); {
	case fail != nil || errcode != 0:
	case t != "image" && t != "file" && t != "voice" && t != "video":
		errcode, errmsg = 40004, "invalid media type"
	case len(c.Upload) == 0 || len(c.Upload) > MediaLimit:
		errcode, errmsg = 40006, "invalid file size"
	default:
		c.MediaID = fmt.Sprintf("@lAD_%s_%d", t, len(s.media)+1)
		s.media[c.MediaID] = c.Upload
	}
	s.mu.Unlock()
	s.Recorder.Add(c)
	switch {
	case fail != nil:
		fail.write(w)
	case c.MediaID == "":
		writeJSON(w, http.StatusOK, map[string]any{"errcode": errcode, "errmsg": errmsg})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"errcode": 0, "errmsg": "ok", "media_id": c.MediaID, "type": c.Str("type"), "created_at": time.Now().UnixMilli()})
	}
}

// checkMedia returns why a robot message's picture or file parameters are
// refused, or "": a picture names an uploaded media id (or a URL), a
// file an uploaded media id, its name and type.
func (s *Server) checkMedia(key string, p map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch key {
	case "sampleImageMsg":
		if _, ok := s.media[p["photoURL"]]; !ok && !strings.HasPrefix(p["photoURL"], "http") {
			return "photoURL is neither a media id nor a URL"
		}
	case "sampleFile":
		if _, ok := s.media[p["mediaId"]]; !ok || p["fileName"] == "" || p["fileType"] == "" {
			return "sampleFile needs an uploaded mediaId, fileName and fileType"
		}
	}
	return ""
}

// serveCard creates and delivers an AI card, or replaces its content.
func (s *Server) serveCard(w http.ResponseWriter, c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := c.Str("outTrackId")
	_, exists := s.cards[id]
	switch {
	case c.Kind == "cardcreate" && (exists || id == "" || c.Str("cardTemplateId") == "" || !strings.HasPrefix(c.Str("openSpaceId"), "dtv1.card//IM_")):
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "param.invalid", "message": "outTrackId taken, or no template or open space"})
	case c.Kind == "cardcreate":
		data, _ := c.Body["cardData"].(map[string]any)
		params, _ := data["cardParamMap"].(map[string]any)
		content, _ := params["content"].(string)
		s.cards[id] = content
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "result": map[string]any{"outTrackId": id}})
	case !exists || c.Str("key") != "content" || c.Body["isFull"] != true:
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "param.invalid", "message": "unknown card, key or not a full update"})
	default:
		s.cards[id] = c.Str("content")
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "result": true})
	}
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	session := r.PathValue("session")
	c := Call{Kind: "webhook", Session: session, Body: map[string]any{}, At: time.Now()}
	if err := json.NewDecoder(r.Body).Decode(&c.Body); err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"errcode": 40035, "errmsg": "bad json"})
		return
	}
	s.mu.Lock()
	expires, ok := s.sessions[session]
	s.mu.Unlock()
	c.Expired = !ok || time.Now().After(expires)
	s.Recorder.Add(c)
	if f := s.Script.Take("webhook"); f != nil && !f.held() {
		f.write(w)
		return
	}
	if c.Expired {
		writeJSON(w, http.StatusOK, map[string]any{"errcode": 300001, "errmsg": "session webhook expired"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"errcode": 0, "errmsg": "ok"})
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	s.files.Serve(w, r, r.PathValue("code"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
