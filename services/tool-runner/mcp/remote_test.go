package mcp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanofleet/nanofleet/services/tool-runner/mcp"
)

type echoIn struct {
	Message string `json:"message"`
}

// goServer is an MCP server built with the SDK, serving streamable HTTP on
// /mcp and SSE on /sse. It counts requests carrying the expected
// Authorization header.
func goServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "go-test", Version: "1.0.0"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo", Description: "Echo"}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, any, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "go echo: " + in.Message}}}, nil, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "wait", Description: "Waits for cancellation", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	srv.AddTool(&mcpsdk.Tool{Name: "image", Description: "A tiny image", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "here:"}, &mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")}}}, nil
		})
	var authed atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	sse := mcpsdk.NewSSEHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	mux.Handle("/sse", sse)
	mux.Handle("/sse/", sse)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer t0ken" {
			authed.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, &authed
}

// TestRemoteServers: streamable HTTP and SSE (inferred from the URL), the
// configured headers sent, loopback refused unless allowed.
func TestRemoteServers(t *testing.T) {
	ts, authed := goServer(t)
	loopback := []string{"127.0.0.0/8", "::1/128"}
	m, _ := startManager(t, sandboxNone(), map[string]mcp.ServerConfig{
		"streamy": {URL: ts.URL + "/mcp", AllowCIDRs: loopback, Headers: map[string]string{"Authorization": "Bearer t0ken"}, ToolTimeout: 1},
		"ssey":    {URL: ts.URL + "/sse", AllowCIDRs: loopback},
		"blocked": {URL: ts.URL + "/mcp"},
	})
	st := map[string]mcp.ServerStatus{}
	for _, s := range m.Status() {
		st[s.Name] = s
	}
	if s := st["streamy"]; s.State != mcp.StateReady || s.Transport != mcp.TransportStreamableHTTP {
		t.Errorf("streamable: %+v", s)
	}
	if s := st["ssey"]; s.State != mcp.StateReady || s.Transport != mcp.TransportSSE {
		t.Errorf("sse: %+v", s)
	}
	if s := st["blocked"]; s.State != mcp.StateDown || !strings.Contains(s.LastError, "loopback") {
		t.Errorf("loopback without allowCIDRs: %+v", s)
	}
	mustCall(t, m, "mcp_streamy_echo", `{"message":"over http"}`, "go echo: over http")
	mustCall(t, m, "mcp_ssey_echo", `{"message":"over sse"}`, "go echo: over sse")
	if authed.Load() == 0 {
		t.Error("the Authorization header never reached the server")
	}
	res, err := call(t, m, "mcp_ssey_image", ``)
	if err != nil || !strings.Contains(res.Text, "[image: image/png, 9 bytes, not stored]") {
		t.Errorf("image without an object store: %q %v", res.Text, err)
	}
	_, err = call(t, m, "mcp_streamy_wait", ``)
	if !errors.Is(err, mcp.ErrTimeout) {
		t.Errorf("remote call past toolTimeout: %v", err)
	}
	mustCall(t, m, "mcp_streamy_echo", `{"message":"after the timeout"}`, "go echo: after the timeout")
}
