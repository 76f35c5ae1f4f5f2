package markup_test

import (
	"fmt"

	"github.com/nanofleet/nanofleet/services/channel-gateway/markup"
)

func ExampleTelegramHTML() {
	fmt.Println(markup.TelegramHTML("**Done:** ran `go test` on <pkg>"))
	// Output: <b>Done:</b> ran <code>go test</code> on &lt;pkg&gt;
}

func ExampleSlackMrkdwn() {
	fmt.Println(markup.SlackMrkdwn("**Done**, see [the log](https://ci.example.com/1)"))
	// Output: *Done*, see <https://ci.example.com/1|the log>
}

func ExampleSplit() {
	parts := markup.Split("first paragraph\n\nsecond paragraph", 20)
	fmt.Printf("%q\n", parts)
	// Output: ["first paragraph" "second paragraph"]
}
