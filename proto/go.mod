module github.com/nanofleet/nanofleet/proto

go 1.26

tool google.golang.org/protobuf/cmd/protoc-gen-go

require google.golang.org/protobuf v1.36.12
