package llm

import (
	"strings"
	"unicode"
)

// nanobotRenamed are nanobot's provider names for presets nanofleet names
// otherwise (nanobot's snake_case; its camelCase form, azureOpenai, is
// the same provider).
var nanobotRenamed = map[string]string{
	"azure_openai": ProviderAzure,
	"lm_studio":    ProviderLMStudio,
}

// nanobotOnly are the providers of nanobot's schema that nanofleet has no
// preset for (as of nanobot's config/schema.py with Bedrock and the
// custom providers by name; older releases' kilo, xai and
// dashscope_coding_plan too).
var nanobotOnly = []string{
	"aihubmix", "ant_ling", "assemblyai", "atomic_chat", "bedrock", "byteplus", "byteplus_coding_plan",
	"dashscope", "dashscope_coding_plan", "edenai", "github_copilot", "huggingface", "kilo", "kimi_coding",
	"longcat", "minimax", "minimax_anthropic", "mistral", "modelscope", "moonshot", "novita", "nvidia",
	"openai_codex", "opencode", "opencode_go", "opencode_zen", "orcarouter", "ovms", "qianfan",
	"siliconflow", "skywork", "stepfun", "volcengine", "volcengine_coding_plan", "xai", "xai_grok",
	"xiaomi_mimo", "zhipu",
}

// snakeCase is a provider name as nanobot's schema writes it:
// "azureOpenai" is azure_openai.
func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
