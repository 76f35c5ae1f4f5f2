package toolclient

// Names of the tool protocol.
const (
	// ServiceName is the micro service name of the tool runners.
	ServiceName = "tool-runner"
	// QueueGroup is the queue group all runners' endpoints share.
	QueueGroup = "tool-runner"
	// HeaderStatus says what a message on the reply inbox is.
	HeaderStatus = "Nanofleet-Tool-Status"
	// HeaderRunner carries the id of the runner handling the call.
	HeaderRunner = "Nanofleet-Tool-Runner"
	// StatusRunning marks a heartbeat.
	StatusRunning = "running"
	// StatusDone marks the final ToolResult.
	StatusDone = "done"
	// StatusRejected marks a call the runner did not start.
	StatusRejected = "rejected"
)

// natsStatusHeader and noResponders are how the NATS server says that no
// one subscribes to a request's subject.
const (
	natsStatusHeader = "Status"
	noResponders     = "503"
)
