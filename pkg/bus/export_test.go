package bus

// FlushesOnClose exposes whether Close will flush, so that a test tells a
// skipped flush from one that waits for a server gone without timing it.
var FlushesOnClose = (*Bus).flushesOnClose
