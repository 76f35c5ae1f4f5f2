package runner

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// boundedBlobs is the object store as tools use it: a put that would take
// it past its MaxBytes is refused before any chunk is sent. JetStream
// refuses such a put itself, but chunk by chunk: the chunks it took before
// the bound are purged, and their space on disk was not given back
// (measured: twelve refused 15 MB images a turn grew the store's files by
// about 30 MB each turn until the disk was full), so refused puts filled
// the disk the bound is there to protect. Puts running at once can still
// pass the check together; JetStream's own refusal bounds them.
type boundedBlobs struct {
	jetstream.ObjectStore
}

// PutBytes implements tools.Blobs.
func (b boundedBlobs) PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error) {
	st, err := b.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("object store status: %w", err)
	}
	if s, ok := st.(*jetstream.ObjectBucketStatus); ok {
		// Each 128 KiB chunk is a message with a subject and headers;
		// 1/64 and 4 KiB cover them and the object's metadata.
		need := uint64(len(data)) + uint64(len(data))/64 + 4096
		if limit := s.StreamInfo().Config.MaxBytes; limit > 0 && s.Size()+need > uint64(limit) {
			return nil, fmt.Errorf("%w: it holds %d of its %d bytes, and %s needs %d (stored objects expire after %s)",
				ErrBlobsFull, s.Size(), limit, name, len(data), s.TTL())
		}
	}
	return b.ObjectStore.PutBytes(ctx, name, data)
}
