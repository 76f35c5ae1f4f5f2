//go:build tools

// Package deps pins the libraries the project is built from while their
// first users are being written.
package deps

import (
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/nats-io/nats.go/micro"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/sashabaranov/go-openai"
	_ "google.golang.org/protobuf/proto"
)
