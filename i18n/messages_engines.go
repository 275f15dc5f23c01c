package i18n

// Messages about what a speech engine can and cannot do with a line (issue 19): the
// caps on a line's length, the languages a model knows, the vLLM engine's emotion weight.
func init() {
	register(map[string]Message{
		"tts.error.text_too_long": {
			EN: "This line is too long for the speech model to say in one piece: split it into shorter lines (at a sentence end).",
			ZH: "此台词过长，语音模型无法一次生成：请在句末拆分为较短的台词。",
		},
		"tts.error.unsupported": {
			EN: "The speech engine does not support one of this line's settings (its language, or an emotion weight with emotion from text on the vLLM engine).",
			ZH: "语音引擎不支持此台词的某项设置（语言，或 vLLM 引擎上“从文本生成情感”时的情感权重）。",
		},
		"character.emotion_weight_vllm": {
			EN: "On the vLLM engine the weight scales an emotion vector; with emotion from text it must stay 1.",
			ZH: "在 vLLM 引擎上，权重会按比例缩放情感向量；“从文本生成情感”时必须保持为 1。",
		},
	})
}
