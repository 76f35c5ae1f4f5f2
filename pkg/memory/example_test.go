package memory_test

import (
	"fmt"

	"github.com/nanofleet/nanofleet/pkg/memory"
	nanofleetv1 "github.com/nanofleet/nanofleet/proto/nanofleet/v1"
)

func ExampleScope_Key() {
	for _, s := range []memory.Scope{
		memory.AgentScope("default"),
		memory.UserScope("default", "ada"),
		memory.SessionScope("default", "telegram:42"),
	} {
		back, _ := memory.ParseScope(s.Key())
		fmt.Println(s.Key(), "=", back)
	}
	// Output:
	// agent.default.= = agent default
	// user.default.ada = user ada
	// session.default.telegram=3A42 = session telegram:42
}

func ExampleRenderContext() {
	doc := &nanofleetv1.MemoryDoc{
		Content: "- Ada lives in Lisbon",
		Recent: []*nanofleetv1.HistoryEntry{
			{Text: "[2026-01-01 10:00] Ada asked about trains to Porto."},
			{Text: "[2026-01-02 09:00] Ada booked the 9:00 train."},
		},
	}
	fmt.Println(memory.RenderContext(doc, 1000))
	// Output:
	// ## Long-term Memory
	//
	// - Ada lives in Lisbon
	//
	// ## Recent History
	//
	// - [2026-01-01 10:00] Ada asked about trains to Porto.
	// - [2026-01-02 09:00] Ada booked the 9:00 train.
	//
	// Older conversations are in the history log: search it with the memory_search tool.
}
