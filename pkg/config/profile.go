package config

import "encoding/json"

// EditableProfile reports tools.workspace.editableProfile: whether
// sessions may change the agent's bootstrap files and skills in the
// workspace (nanobot's behaviour). Off by default; see package profile.
// The tool runner owns and validates the tools section; services that
// only need this one setting (profile seeding, the file sync) read it
// here, leniently, so they need not know the rest of the section.
func (f *File) EditableProfile() bool {
	var t struct {
		Workspace struct {
			EditableProfile bool `json:"editableProfile"`
		} `json:"workspace"`
	}
	if len(f.Tools) == 0 || json.Unmarshal(f.Tools, &t) != nil {
		return false
	}
	return t.Workspace.EditableProfile
}
