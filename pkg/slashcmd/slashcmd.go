// Package slashcmd lists the slash commands a fleet answers, for the chat
// platforms that show them in a command menu. It depends on nothing, so
// that an adapter showing the menu links nothing of the worker's.
package slashcmd

// MenuEntry is a slash command as a chat platform's command menu shows it.
type MenuEntry struct {
	// Name is the command with its slash, e.g. "/dream-log".
	Name string
	// Help is what it does, short enough for a menu.
	Help string
}

// Menu lists the slash commands every fleet answers (the worker's and the
// memory's), for the platforms that offer a command menu (Telegram's, as
// nanobot registers its own there). The worker's tests check that it
// answers each.
func Menu() []MenuEntry {
	return []MenuEntry{
		{"/new", "Archive this conversation and start fresh"},
		{"/stop", "Stop the running turn"},
		{"/status", "Model, session and fleet state"},
		{"/model", "Show or set this session's model"},
		{"/history", "Show the last messages"},
		{"/skill", "List the agent's skills"},
		{"/dream-log", "What Dream changed in memory"},
		{"/dream-restore", "Undo a memory revision from /dream-log"},
		{"/help", "Show the commands"},
	}
}
