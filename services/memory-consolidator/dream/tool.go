package dream

import (
	"encoding/json"

	"github.com/nanofleet/nanofleet/pkg/toolschema"
)

// systemPrompt is Dream's system message. memtest.IsDream recognises a
// Dream request by its first words.
const systemPrompt = "You are Dream, the memory keeper of an AI assistant. Call the save_dream tool with your refinement of the files."

// fileProperty is the schema of a file's new content in save_dream: a
// string, where null, absence or blank text leave the file as it is
// (proposed).
func fileProperty(name string) map[string]any {
	return map[string]any{
		"type":        []string{"string", "null"},
		"description": "The full new content of " + name + ", or null to leave it unchanged.",
	}
}

// dreamProperties are save_dream's arguments in every scope: what refine
// reads of the answer besides the profile files and the skills.
func dreamProperties() map[string]any {
	return map[string]any{
		"summary": map[string]any{
			"type":        "string",
			"description": "One sentence: what you changed and why.",
		},
		"memory": fileProperty("MEMORY.md"),
	}
}

// saveDream is the tool the model must call to refine a user's or a
// session's scope, which has MEMORY.md only. Every argument is optional,
// as in the answer refine read before tools were forced: no summary gets
// a default one, a file left out stays unchanged.
var saveDream = toolschema.Tool{
	Name:        "save_dream",
	Description: "Save Dream's refinement of the memory files.",
	Parameters:  toolschema.Object(dreamProperties()),
}

var saveDreamSchema = toolschema.MustCompile(saveDream.Parameters)

// saveAgentDream is save_dream for the agent's shared scope, which also
// has USER.md, SOUL.md and the skills. Skills are a map of name to full
// SKILL.md (proposedSkills): a value that is null or blank, or a name
// outside skillName, is skipped and the rest of the answer still applies,
// so the name rule is told, not enforced by the schema.
var saveAgentDream = toolschema.Tool{
	Name:        saveDream.Name,
	Description: "Save Dream's refinement of the memory, profile and skill files.",
	Parameters: func() json.RawMessage {
		p := dreamProperties()
		p["user"] = fileProperty("USER.md")
		p["soul"] = fileProperty("SOUL.md")
		p["skills"] = map[string]any{
			"type":        []string{"object", "null"},
			"description": "Only the skills you add or change: skill name (letters, digits, _ and -, at most 64 characters, starting with a letter or digit) to its full new SKILL.md. Leave out the skills that stay as they are.",
			"additionalProperties": map[string]any{
				"type": []string{"string", "null"},
			},
		}
		return toolschema.Object(p)
	}(),
}

var saveAgentDreamSchema = toolschema.MustCompile(saveAgentDream.Parameters)
