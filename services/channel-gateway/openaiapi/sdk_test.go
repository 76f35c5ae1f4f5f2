package openaiapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/pkg/bustest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/channels"
	"github.com/nanofleet/nanofleet/services/channel-gateway/internal/workertest"
	"github.com/nanofleet/nanofleet/services/channel-gateway/openaiapi/openaiapitest"
)

// sdkProgram asks one question with the npm openai client, whose timeout
// is shorter than the turn, so that it gives up on its first attempt and
// retries, as it does by default.
const sdkProgram = `
const OpenAI = require(process.env.OPENAI_MODULE);
const client = new OpenAI({apiKey: process.env.API_KEY, baseURL: process.env.BASE_URL, timeout: 1000, maxRetries: 2});
client.chat.completions.create({model: 'nanofleet', user: 'sdk', messages: [{role: 'user', content: 'via the sdk'}]})
  .then(r => console.log(r.choices[0].message.content))
  .catch(e => { console.error(String(e)); process.exit(1); });
`

// TestOpenAINodeSDKRetry: the official client times out on a slow turn
// and retries; the retry gets the first request's answer, and the fleet
// runs the turn once.
func TestOpenAINodeSDKRetry(t *testing.T) {
	sdk := openaiapitest.NodeSDK(t)
	b := bustest.StartJetStream(t, channels.Assets)
	s := newServer(t, b, nil)
	// The turn's answer waits until the client's retry has arrived.
	retried := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Stainless-Retry-Count") == "1" {
			once.Do(func() { close(retried) })
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	w := workertest.Start(t, b, script, workertest.HoldUntil(retried, 20*time.Second))
	out := sdk.Run(ctx(t), t, sdkProgram, key, srv.URL+"/v1")
	if got := strings.TrimSpace(string(out)); got != "You said: via the sdk" {
		t.Errorf("answer %q", got)
	}
	select {
	case <-retried:
	default:
		t.Error("the client did not retry: the test proves nothing")
	}
	if n := len(w.Inbound); n != 1 {
		t.Errorf("%d turns for one question, want 1", n)
	}
}
