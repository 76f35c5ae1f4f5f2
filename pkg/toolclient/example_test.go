package toolclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bus"
	"github.com/nanofleet/nanofleet/pkg/toolclient"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

// A worker lists the tools for the model, then runs the model's calls.
func ExampleClient_Call() {
	ctx := context.Background()
	b, err := bus.Connect(ctx, bus.Config{URL: "nats://127.0.0.1:4222"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	tools, err := toolclient.New(b, toolclient.WithLivenessTimeout(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defs, err := tools.Catalog(ctx) // sorted by name, ready for the provider
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(defs), "tools")

	res, err := tools.Call(ctx, &nanofleetv1.ToolRequest{
		CallId:        "call_1",
		Name:          "read_file",
		ArgumentsJson: `{"path": "notes.md"}`,
		SessionKey:    "telegram:42",
	})
	if err != nil { // only a cancelled ctx or an unsendable call
		fmt.Println(err)
		return
	}
	if res.GetIsError() {
		fmt.Println(res.GetErrorKind(), res.GetContent()) // for the model to read
	}
}
