package i18n

// Messages of the project language and the names of the preview voices (espeak-ng
// codes in studio.PreviewVoices).
func init() {
	register(map[string]Message{
		"language.label":   {EN: "Project language", ZH: "项目语言"},
		"language.none":    {EN: "Not set (guess from each line)", ZH: "未设置（按每句文本推测）"},
		"language.hint":    {EN: "New characters get a preview voice in this language.", ZH: "新角色将使用此语言的预览语音。"},
		"language.saved":   {EN: "Language saved.", ZH: "语言已保存。"},
		"language.unknown": {EN: "Choose a language from the list.", ZH: "请从列表中选择语言。"},
		"voice.en":         {EN: "English", ZH: "英语"},
		"voice.en-us":      {EN: "English (US)", ZH: "英语（美国）"},
		"voice.en-gb-x-rp": {EN: "English (UK, RP)", ZH: "英语（英国标准音）"},
		"voice.cmn":        {EN: "Mandarin Chinese", ZH: "普通话"},
		"voice.yue":        {EN: "Cantonese", ZH: "粤语"},
		"voice.ja":         {EN: "Japanese", ZH: "日语"},
		"voice.ko":         {EN: "Korean", ZH: "韩语"},
		"voice.fr":         {EN: "French", ZH: "法语"},
		"voice.de":         {EN: "German", ZH: "德语"},
		"voice.es":         {EN: "Spanish", ZH: "西班牙语"},
		"voice.it":         {EN: "Italian", ZH: "意大利语"},
		"voice.pt":         {EN: "Portuguese", ZH: "葡萄牙语"},
		"voice.ru":         {EN: "Russian", ZH: "俄语"},
	})
}
