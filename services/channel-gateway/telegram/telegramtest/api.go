package telegramtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if p, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/"); ok {
		s.serveFile(w, p)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+s.Token+"/")
	if !ok {
		reply(w, 404, nil, Failure{Code: 404, Description: "Not Found"})
		return
	}
	call, err := parse(r)
	if err != nil {
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	call.Method, call.At = method, time.Now()
	if method == "getUpdates" {
		s.getUpdates(w, r, call)
		return
	}
	s.mu.Lock()
	f := s.Script.Take(method)
	s.mu.Unlock()
	if f != nil {
		s.Recorder.Add(call)
		reply(w, f.Code, nil, *f)
		return
	}
	if method == "sendMessage" || method == "editMessageText" {
		if n := TextLen(call.Fields["text"], call.Fields["parse_mode"]); n > MaxText {
			s.Recorder.Add(call)
			desc := "Bad Request: message is too long"
			if method == "editMessageText" {
				desc = "Bad Request: MESSAGE_TOO_LONG"
			}
			reply(w, 400, nil, Failure{Code: 400, Description: desc})
			return
		}
	}
	if method == "editMessageText" {
		s.editText(w, call)
		return
	}
	if method == "sendMessage" {
		s.mu.Lock()
		s.nextMsgID++
		call.MessageID = s.nextMsgID
		s.texts[call.MessageID] = call.Fields["text"]
		s.mu.Unlock()
	}
	if method == "setWebhook" { // before the call is seen, so Webhook reports it
		s.mu.Lock()
		s.webhook, s.secret = call.Fields["url"], call.Fields["secret_token"]
		s.mu.Unlock()
	}
	s.Recorder.Add(call)
	switch method {
	case "getMe":
		reply(w, 200, map[string]any{"id": s.BotID, "is_bot": true, "first_name": "Nano", "username": s.BotUsername}, Failure{})
	case "sendMessage", "sendPhoto", "sendDocument":
		id := call.MessageID
		if id == 0 {
			s.mu.Lock()
			s.nextMsgID++
			id = s.nextMsgID
			s.mu.Unlock()
		}
		chat, _ := strconv.ParseInt(call.Fields["chat_id"], 10, 64)
		reply(w, 200, map[string]any{
			"message_id": id, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"}, "text": call.Fields["text"],
		}, Failure{})
	case "deleteMessage":
		id, _ := strconv.Atoi(call.Fields["message_id"])
		s.mu.Lock()
		_, ok := s.texts[id]
		delete(s.texts, id)
		s.mu.Unlock()
		if !ok {
			reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message to delete not found"})
			return
		}
		reply(w, 200, true, Failure{})
	case "sendChatAction", "deleteWebhook":
		reply(w, 200, true, Failure{})
	case "setMyCommands":
		if err := checkCommands(call.Fields["commands"]); err != nil {
			reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
			return
		}
		reply(w, 200, true, Failure{})
	case "setWebhook":
		reply(w, 200, true, Failure{})
	case "getFile":
		s.mu.Lock()
		f, ok := s.files[call.Fields["file_id"]]
		s.mu.Unlock()
		if !ok {
			reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: invalid file_id"})
			return
		}
		reply(w, 200, map[string]any{"file_id": call.Fields["file_id"], "file_unique_id": "u" + call.Fields["file_id"], "file_size": len(f.data), "file_path": f.path}, Failure{})
	default:
		reply(w, 404, nil, Failure{Code: 404, Description: "Not Found: method " + method})
	}
}

// checkCommands refuses a setMyCommands list as the Bot API does: each
// command 1-32 characters of a-z, 0-9 and '_', each description 1-256
// characters (https://core.telegram.org/bots/api#botcommand).
func checkCommands(raw string) error {
	var cmds []struct {
		Command     string `json:"command"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(raw), &cmds); err != nil {
		return fmt.Errorf("can't parse commands JSON object: %w", err)
	}
	for _, c := range cmds {
		if !commandName.MatchString(c.Command) {
			return errors.New("BOT_COMMAND_INVALID")
		}
		if n := utf8.RuneCountInString(c.Description); n < 1 || n > 256 {
			return errors.New("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	return nil
}

var commandName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

// MaxText is the longest message text Telegram takes: 4,096 characters
// after entity parsing (https://core.telegram.org/bots/api#sendmessage),
// counted in UTF-16 code units as the entity offsets are.
const MaxText = 4096

// TextLen is how long Telegram counts text sent with parseMode: for HTML,
// the text once tags are removed and entities decoded.
func TextLen(text, parseMode string) int {
	if parseMode == "HTML" {
		text = html.UnescapeString(tag.ReplaceAllString(text, ""))
	}
	n := 0
	for _, r := range text {
		n += max(1, utf16.RuneLen(r))
	}
	return n
}

var tag = regexp.MustCompile(`<[^>]*>`)

// editText edits a sent message's text, refusing an unknown message or
// an edit that changes nothing, as Telegram does.
func (s *Server) editText(w http.ResponseWriter, call Call) {
	id, _ := strconv.Atoi(call.Fields["message_id"])
	s.mu.Lock()
	old, ok := s.texts[id]
	if ok && old != call.Fields["text"] {
		s.texts[id] = call.Fields["text"]
		call.MessageID = id
	}
	s.mu.Unlock()
	s.Recorder.Add(call)
	switch {
	case !ok:
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message to edit not found"})
	case old == call.Fields["text"]:
		reply(w, 400, nil, Failure{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
	default:
		chat, _ := strconv.ParseInt(call.Fields["chat_id"], 10, 64)
		reply(w, 200, map[string]any{
			"message_id": id, "date": time.Now().Unix(),
			"chat": map[string]any{"id": chat, "type": "private"}, "text": call.Fields["text"],
		}, Failure{})
	}
}

func (s *Server) serveFile(w http.ResponseWriter, p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.path == p {
			_, _ = w.Write(f.data)
			return
		}
	}
	http.NotFound(w, nil)
}

func reply(w http.ResponseWriter, code int, result any, f Failure) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := map[string]any{"ok": code == 200}
	if code == 200 {
		body["result"] = result
	} else {
		body["error_code"] = f.Code
		body["description"] = f.Description
		if f.RetryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
		}
	}
	_ = json.NewEncoder(w).Encode(body)
}

// parse reads the parameters of a request in any of the encodings the Bot
// API accepts.
func parse(r *http.Request) (Call, error) {
	c := Call{Fields: map[string]string{}, Files: map[string][]byte{}}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil && err != io.EOF {
			return c, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				c.Fields[k] = s
				continue
			}
			data, _ := json.Marshal(v)
			c.Fields[k] = string(data)
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); errors.Is(err, io.EOF) {
			return c, nil // a method without parameters: an empty form
		} else if err != nil {
			return c, err
		}
		for k, v := range r.MultipartForm.Value {
			c.Fields[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return c, err
			}
			data, _ := io.ReadAll(f)
			f.Close()
			c.Files[k] = data
		}
	default:
		if err := r.ParseForm(); err != nil {
			return c, fmt.Errorf("form: %w", err)
		}
		for k, v := range r.Form {
			c.Fields[k] = v[0]
		}
	}
	return c, nil
}
