package bustest

import (
	"context"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// Consumers lists the names of st's consumers, sorted: for a test that
// checks what a client left on the server.
func Consumers(ctx context.Context, st jetstream.Stream) ([]string, error) {
	var names []string
	list := st.ConsumerNames(ctx)
	for name := range list.Name() {
		names = append(names, name)
	}
	if err := list.Err(); err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}
