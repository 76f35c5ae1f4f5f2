module github.com/nanofleet/nanofleet/services/channel-gateway

go 1.26.0

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/coder/websocket v1.8.15
	github.com/disgoorg/disgo v0.18.15
	github.com/disgoorg/snowflake/v2 v2.0.3
	github.com/go-telegram/bot v1.19.0
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674
	github.com/larksuite/oapi-sdk-go/v3 v3.4.22
	github.com/nanofleet/nanofleet/pkg v0.0.0-00010101000000-000000000000
	github.com/nanofleet/nanofleet/proto v0.0.0-00010101000000-000000000000
	github.com/nats-io/nats.go v1.55.0
	github.com/open-dingtalk/dingtalk-stream-sdk-go v0.9.1
	github.com/prometheus/client_golang v1.25.0
	github.com/sashabaranov/go-openai v1.43.0
	github.com/slack-go/slack v0.35.0
	github.com/yuin/goldmark v1.8.7
	go.mau.fi/util v0.9.4
	go.mau.fi/whatsmeow v0.0.0-20251217143725-11cf47c62d32
	golang.org/x/sync v0.24.0
	google.golang.org/protobuf v1.36.12
	rsc.io/qr v0.2.0
)

require (
	filippo.io/edwards25519 v1.1.0 // indirect
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/beeper/argo-go v1.1.2 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/disgoorg/json v1.2.0 // indirect
	github.com/elliotchance/orderedmap/v3 v3.1.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rs/zerolog v1.34.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/sasha-s/go-csync v0.0.0-20240107134140-fcbab37b09ad // indirect
	github.com/vektah/gqlparser/v2 v2.5.27 // indirect
	go.mau.fi/libsignal v0.2.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace (
	github.com/nanofleet/nanofleet/pkg => ../../pkg
	github.com/nanofleet/nanofleet/proto => ../../proto
)
