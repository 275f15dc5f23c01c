package i18n

// Messages of package audio: why an uploaded file is refused, and the duration lock's
// hints to the editor.
func init() {
	register(map[string]Message{
		"audio.empty":              {EN: "The file is empty.", ZH: "文件是空的。"},
		"audio.unreadable":         {EN: "This file is not audio that can be read. It may be another kind of file, or damaged.", ZH: "无法作为音频读取此文件，它可能是其他类型的文件，或已损坏。"},
		"audio.no_sound":           {EN: "This file has no sound track.", ZH: "此文件没有音轨。"},
		"audio.truncated":          {EN: "This audio file is incomplete: it ends before its headers say it should. Upload it again.", ZH: "音频文件不完整：实际长度短于文件头声明的长度。请重新上传。"},
		"audio.format_not_allowed": {EN: "%s files are not accepted here. Use one of: %s.", ZH: "此处不接受 %s 文件，请使用以下格式之一：%s。"},
		"audio.fit.too_long":       {EN: "About %v%% too long even at the fastest allowed speed: shorten the text or allow more stretch.", ZH: "即使以允许的最快语速仍超长约 %v%%：请缩短文本或放宽变速上限。"},
		"audio.fit.silent":         {EN: "The take is silent: synthesize it again.", ZH: "该条音频没有声音：请重新合成。"},
		"audio.no_space":           {EN: "The server's disk is full: the audio could not be saved.", ZH: "服务器磁盘已满，无法保存音频。"},
	})
}
