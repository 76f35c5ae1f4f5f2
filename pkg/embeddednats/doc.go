// Package embeddednats runs a nats-server with JetStream inside the
// process: the all-in-one's bus, and the tests'.
//
// It is its own package, apart from [bus], so that the services, which
// only connect to a server, do not link one: the server is most of a
// service binary's size and of the pages it has resident when idle.
package embeddednats
