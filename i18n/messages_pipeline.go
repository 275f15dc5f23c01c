package i18n

// Messages of the render pipeline: actions, failures and the glossary.
func init() {
	register(map[string]Message{
		"glossary.bad_term":   {EN: "A term is 1 to 100 characters.", ZH: "术语为 1 到 100 个字符。"},
		"glossary.bad_spoken": {EN: "Say how to pronounce it, in at most 200 characters.", ZH: "请填写读法，不超过 200 个字符。"},

		"render.no_reference":    {EN: "%s has no reference voice: upload one on the Characters page.", ZH: "%s 没有参考音色：请在角色页面上传。"},
		"render.no_character":    {EN: "This line has no character: assign one before rendering.", ZH: "这句台词没有角色：请先分配角色再合成。"},
		"render.empty_text":      {EN: "This line has no text to speak.", ZH: "这句台词没有可合成的文本。"},
		"render.internal":        {EN: "The render failed: %s", ZH: "合成失败：%s"},
		"render.no_slot_length":  {EN: "This line's slot has no length: fix its timing.", ZH: "这句台词的时间槽长度为零：请修正时间。"},
		"render.too_long":        {EN: "This line is longer than the GPU profile allows (%.0f s): split it.", ZH: "这句台词超过 GPU 配置允许的长度（%.0f 秒）：请拆分。"},
	})
}
