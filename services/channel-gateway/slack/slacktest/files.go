package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Upload is the method name under which the POSTs of a file's bytes to
// its upload URL are recorded and scripted (Fail, Pass): not a Web API
// method, the second step of Slack's upload
// (https://docs.slack.dev/reference/methods/files.getUploadURLExternal).
// Its scripted failures are HTTP statuses, as the upload URL answers no
// JSON.
const Upload = "upload"

// File is a file uploaded to the fake: the name and length
// files.getUploadURLExternal was given, the bytes its upload URL received,
// and, once files.completeUploadExternal shared it, its title, channel
// and thread.
type File struct {
	ID, Name string
	Length   int
	Data     []byte
	Title    string
	Channel  string
	// ThreadTS is the thread it was shared in, "" for the channel itself.
	ThreadTS string
}

// reserve answers files.getUploadURLExternal: a file id and the URL to
// POST its bytes to, on the fake itself. Called with s.mu held.
func (s *Server) reserve(fields map[string]string) map[string]any {
	if fields["filename"] == "" || fields["length"] == "" || fields["length"] == "0" {
		return map[string]any{"ok": false, "error": "missing_argument"}
	}
	n, err := strconv.Atoi(fields["length"])
	if err != nil || n < 0 {
		return map[string]any{"ok": false, "error": "invalid_arguments"}
	}
	s.fileIDs++
	id := fmt.Sprintf("F%09d", s.fileIDs)
	s.uploads[id] = &File{ID: id, Name: fields["filename"], Length: n}
	return map[string]any{"ok": true, "upload_url": s.URL + "/upload/v1/" + id, "file_id": id}
}

// share answers files.completeUploadExternal, sharing each file its files
// field lists in channel_id (and thread_ts), and returns the files
// shared. A file never reserved, or whose bytes never came, is refused
// with file_not_found. Called with s.mu held.
func (s *Server) share(fields map[string]string) (map[string]any, []File) {
	var listed []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(fields["files"]), &listed); err != nil || len(listed) == 0 {
		return map[string]any{"ok": false, "error": "invalid_arguments"}, nil
	}
	for _, l := range listed {
		if f := s.uploads[l.ID]; f == nil || f.Data == nil {
			return map[string]any{"ok": false, "error": "file_not_found"}, nil
		}
	}
	var shared []File
	var answer []map[string]any
	for _, l := range listed {
		f := s.uploads[l.ID]
		delete(s.uploads, l.ID)
		f.Title, f.Channel, f.ThreadTS = l.Title, fields["channel_id"], fields["thread_ts"]
		shared = append(shared, *f)
		answer = append(answer, map[string]any{"id": f.ID, "title": f.Title})
	}
	return map[string]any{"ok": true, "files": answer}, shared
}

// serveUpload takes a file's bytes at the URL files.getUploadURLExternal
// handed out, as raw bytes or the file part of a multipart form (Slack
// takes either; slack-go sends the form), and answers 200 with Slack's
// "OK - <length>".
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, readErr := uploaded(r)
	c := Call{Method: Upload, Fields: map[string]string{"file_id": id}, Token: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), At: time.Now()}
	s.mu.Lock()
	fail := s.Script.Take(Upload)
	f := s.uploads[id]
	ok := fail == nil && readErr == nil && f != nil && f.Data == nil
	if ok {
		f.Data = data
		c.Files = []File{*f}
	}
	s.mu.Unlock()
	s.Recorder.Add(c)
	switch {
	case fail != nil:
		writeFailure(w, fail)
	case readErr != nil:
		http.Error(w, readErr.Error(), http.StatusBadRequest)
	case !ok:
		http.Error(w, "unknown or used upload URL", http.StatusNotFound)
	default:
		_, _ = fmt.Fprintf(w, "OK - %d", len(data))
	}
}

// uploaded reads an upload's bytes: the first file part of a multipart
// form, else the body itself.
func uploaded(r *http.Request) ([]byte, error) {
	if typ, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); typ != "multipart/form-data" {
		return io.ReadAll(r.Body)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no file in the form: %w", err)
		}
		if p.FileName() != "" {
			return io.ReadAll(p)
		}
	}
}
