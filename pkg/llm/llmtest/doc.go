// Package llmtest is a fake OpenAI-compatible server for tests across the
// fleet. It serves POST /v1/chat/completions (JSON, or server-sent events
// when the request has "stream": true, chunked exactly like OpenAI and
// ended with "data: [DONE]") and GET /v1/models on 127.0.0.1, and records
// every chat request.
//
//	srv := llmtest.NewServer(t)
//	srv.Enqueue(
//		llmtest.ToolCalls(llmtest.Call("write_file", `{"path":"a.txt","content":"x"}`)),
//		llmtest.Text("done"),
//	)
//	cfg := llm.Config{APIBase: srv.URL(), Model: "test-model"}
//	... run the code under test ...
//	reqs := srv.Requests()
//
// # Choosing replies
//
// Each chat request is answered, in this order of precedence, by:
//
//  1. an injected failure (WithFailures) while any remain;
//  2. the next reply queued with Enqueue (queue mode: simple sequential
//     scripts);
//  3. the Script set with Handle (handler mode: concurrent tests), Echo by
//     default.
//
// A Script may be called concurrently and must be safe for that. Echo
// answers "echo: <last user text>", or "tool result: <content>" when the
// last message is a tool result, and never calls tools, so agent loops end.
//
// # Replies
//
// Text, ToolCalls and Fail build a Reply; its With… methods add reasoning
// content, latency, usage or streaming pace. Streams send the role, then
// reasoning_content deltas, content deltas word by word, tool calls (id and
// name first, arguments in several fragments), the finish reason, and a
// usage chunk when the request asked for stream_options.include_usage.
//
// # Cost
//
// The handler decodes the body once and does little else, so it serves
// thousands of requests per second; WithMaxRecorded bounds the memory a
// long benchmark uses for recorded requests.
package llmtest
