// Package slashcmd lists the slash commands a fleet answers: the one list
// the agent worker parses and its /help shows, the memory's commands take
// their help from, and the chat platforms with a command menu show. It
// depends on nothing, so that an adapter showing the menu links nothing of
// the worker's.
package slashcmd

// Command is a slash command as /help and a command menu show it.
type Command struct {
	// Name is the command with its slash, e.g. "/dream-log".
	Name string
	// Usage is its arguments' synopsis, e.g. "[n]"; empty when it takes
	// none.
	Usage string
	// Help is what it does, short enough for a menu.
	Help string
}

// Line is the command as /help lists it: "/history [n] — Show the last
// messages".
func (c Command) Line() string {
	line := c.Name
	if c.Usage != "" {
		line += " " + c.Usage
	}
	return line + " — " + c.Help
}

// Worker lists the commands the agent worker answers itself, in /help's
// order.
func Worker() []Command {
	return []Command{
		{"/new", "", "Archive this conversation into memory and start fresh"},
		{"/stop", "", "Stop the running turn"},
		{"/status", "", "Model, session and fleet state"},
		{"/model", "[name]", "Show or set this session's model"},
		{"/history", "[n]", "Show the last n messages"},
		{"/skill", "", "List the agent's skills"},
		Help(),
	}
}

// Help is /help.
func Help() Command { return Command{"/help", "", "Show the commands"} }

// DreamLog is the memory's /dream-log.
func DreamLog() Command {
	return Command{"/dream-log", "[n]", "What Dream changed in memory, newest first (default 10)"}
}

// DreamRestore is the memory's /dream-restore.
func DreamRestore() Command {
	return Command{"/dream-restore", "<number>", "Undo a memory revision from /dream-log"}
}

// Menu lists the slash commands every fleet answers (the worker's and the
// memory's), for the platforms that offer a command menu (Telegram's, as
// nanobot registers its own there), /help last. The worker's tests check
// that it answers each.
func Menu() []Command {
	w := Worker()
	return append(append(w[:len(w)-1:len(w)-1], DreamLog(), DreamRestore()), Help())
}
