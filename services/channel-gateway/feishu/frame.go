package feishu

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/nanofleet/nanofleet/proto/feishu/pbbp2"
)

// The long connection's protocol, as the official SDK's ws package
// (github.com/larksuite/oapi-sdk-go/v3/ws) defines it; named here, with
// the frame type in proto/feishu/pbbp2, because linking that package
// links the SDK's client for every API service (see pbbp2.proto).
const (
	endpointPath = "/callback/ws/endpoint"
	queryDevice  = "device_id"
	queryService = "service_id"

	headerType      = "type"
	headerMessageID = "message_id"
	headerSum       = "sum"    // parts of a split event; 1 when whole
	headerSeq       = "seq"    // a part's index, from 0
	headerBizRt     = "biz_rt" // ms the event took to handle
	typeEvent       = "event"
	typePing        = "ping"
	typePong        = "pong"
	frameControl    = int32(0) // Frame.method: ping, pong
	frameData       = int32(1) // Frame.method: events

	codeOK         = 0
	codeForbidden  = 403
	codeAuthFailed = 514
	// The app may not use long connections (event delivery by webhook).
	codeNoLongConnection = 1000040351
)

// endpointResponse answers endpointPath.
type endpointResponse struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data *struct {
		URL          string        `json:"URL"`
		ClientConfig *clientConfig `json:"ClientConfig"`
	} `json:"data"`
}

// clientConfig comes with the endpoint and in pongs.
type clientConfig struct {
	PingInterval int `json:"PingInterval"` // seconds
}

// frameResponse is a data frame's payload when it is sent back to
// acknowledge the event.
type frameResponse struct {
	StatusCode int `json:"code"`
}

// header is the value of key in f's headers, "" when absent.
func header(f *pbbp2.Frame, key string) string {
	for _, h := range f.GetHeaders() {
		if h.GetKey() == key {
			return h.GetValue()
		}
	}
	return ""
}

// headerInt is header parsed as an int, 0 when absent or not a number.
func headerInt(f *pbbp2.Frame, key string) int {
	n, _ := strconv.Atoi(header(f, key))
	return n
}

// addHeader appends a header to f.
func addHeader(f *pbbp2.Frame, key, value string) {
	f.Headers = append(f.Headers, &pbbp2.Header{Key: proto.String(key), Value: proto.String(value)})
}

// pingFrame is the control frame that keeps the connection.
func pingFrame(service int32) *pbbp2.Frame {
	f := &pbbp2.Frame{
		SeqID:   proto.Uint64(0),
		LogID:   proto.Uint64(0),
		Service: proto.Int32(service),
		Method:  proto.Int32(frameControl),
	}
	addHeader(f, headerType, typePing)
	return f
}
