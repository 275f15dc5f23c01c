package i18n

// Messages of script import and export (studio/script). Every problem is shown after
// "script.problem_at_line", which carries its line number.
func init() {
	register(map[string]Message{
		"import.bad_mode":           {EN: "Choose how to import: append, merge or replace.", ZH: "请选择导入方式：追加、合并或替换。"},
		"import.replace_active":     {EN: "Line %d is being rendered: cancel the renders before replacing the script.", ZH: "第 %d 句正在生成：请先取消生成，再替换剧本。"},
		"import.encoding":           {EN: "Encoding", ZH: "编码"},
		"import.encoding_auto":      {EN: "detect", ZH: "自动识别"},
		"import.read_as":            {EN: "Read as %s, format %s.", ZH: "按 %s 编码读取，格式为 %s。"},
		"import.duplicates_skipped": {EN: "Skipped %d exact duplicates (same times and text).", ZH: "已跳过 %d 条完全重复的台词（时间与文字相同）。"},
		"import.format_unknown":     {EN: "unknown", ZH: "未知"},

		"script.problem_at_line": {EN: "line %d: %s", ZH: "第 %d 行：%s"},
		"script.more_problems":   {EN: "%d more problems are not listed.", ZH: "另有 %d 个问题未列出。"},

		"script.empty":            {EN: "The file is empty.", ZH: "文件为空。"},
		"script.no_cues":          {EN: "The file contains no lines to import.", ZH: "文件中没有可导入的台词。"},
		"script.unknown_format":   {EN: "Unknown format: the file is not SRT, WebVTT, CSV, SSA/ASS or TTML.", ZH: "无法识别的格式：文件不是 SRT、WebVTT、CSV、SSA/ASS 或 TTML。"},
		"script.not_text":         {EN: "This is not a text file (it contains NUL bytes). If it is UTF-16 or UTF-32, choose that encoding in the import form.", ZH: "这不是文本文件（含有 NUL 字节）。如果是 UTF-16 或 UTF-32 编码，请在导入表单中选择该编码。"},
		"script.invalid_utf8":     {EN: "Invalid UTF-8: choose the file's encoding in the import form, or save it as UTF-8.", ZH: "UTF-8 编码无效：请在导入表单中选择文件的编码，或将文件另存为 UTF-8。"},
		"script.invalid_utf16":    {EN: "Invalid UTF-16: a broken surrogate pair or a missing last byte.", ZH: "UTF-16 编码无效：代理对不完整或缺少最后一个字节。"},
		"script.invalid_utf32":    {EN: "Invalid UTF-32: a code unit that is no character, or a missing last byte.", ZH: "UTF-32 编码无效：存在不是字符的码元，或缺少最后的字节。"},
		"script.invalid_encoding": {EN: "Bytes that are not valid %s: choose the file's encoding in the import form.", ZH: "存在不符合 %s 的字节：请在导入表单中选择文件的编码。"},
		"script.unknown_encoding": {EN: "Unknown encoding %q.", ZH: "未知编码 %q。"},
		"script.control_char":     {EN: "Control character %s is not allowed in a script.", ZH: "脚本中不允许出现控制字符 %s。"},

		"script.vtt_header":       {EN: "A WebVTT file must start with the line WEBVTT.", ZH: "WebVTT 文件必须以 WEBVTT 这一行开头。"},
		"script.missing_timecode": {EN: "Missing timecode: every line needs a start and an end time.", ZH: "缺少时间码：每条台词都需要开始和结束时间。"},
		"script.bad_timing_line":  {EN: "Expected a timing line such as 00:00:01,000 --> 00:00:02,500, found %q.", ZH: "此处应为时间行（例如 00:00:01,000 --> 00:00:02,500），实际为 %q。"},
		"script.bad_timecode":     {EN: "Bad timecode %q: write it as 00:01:02,345, 00:01:02.345, 01:02.345 or 62.345.", ZH: "时间码 %q 无效：应写作 00:01:02,345、00:01:02.345、01:02.345 或 62.345。"},
		"script.end_before_start": {EN: "The end %s is before the start %s.", ZH: "结束时间 %s 早于开始时间 %s。"},
		"script.text_too_long":    {EN: "The text is %d characters long; the limit is %d.", ZH: "台词长度为 %d 个字符，上限为 %d。"},
		"script.name_too_long":    {EN: "The character name is %d characters long; the limit is %d.", ZH: "角色名长度为 %d 个字符，上限为 %d。"},
		"script.emotion_too_long": {EN: "The emotion is %d characters long; the limit is %d.", ZH: "情绪长度为 %d 个字符，上限为 %d。"},
		"script.too_many_cues":    {EN: "Too many lines: a script may have at most %d.", ZH: "台词过多：一个脚本最多 %d 条。"},

		"script.ttml_syntax":            {EN: "The TTML document is not well-formed XML: %s.", ZH: "TTML 文档不是格式正确的 XML：%s。"},
		"script.ttml_root":              {EN: "A TTML document's root element must be <tt>, found <%s>.", ZH: "TTML 文档的根元素必须是 <tt>，实际为 <%s>。"},
		"script.ttml_rates":             {EN: "The ttp:frameRate, ttp:subFrameRate, ttp:frameRateMultiplier or ttp:tickRate of <tt> is not a positive whole number (the multiplier two).", ZH: "<tt> 的 ttp:frameRate、ttp:subFrameRate、ttp:frameRateMultiplier 或 ttp:tickRate 不是正整数（multiplier 应为两个正整数）。"},
		"script.ttml_bad_time":          {EN: "Bad time expression %q: write it as 00:01:02.345, 00:01:02:12 (frames), 62.345s, 1500ms, 24f or 10000t.", ZH: "时间表达式 %q 无效：应写作 00:01:02.345、00:01:02:12（帧）、62.345s、1500ms、24f 或 10000t。"},
		"script.ttml_no_end":            {EN: "This paragraph has no end: give it, or an enclosing div or body, an end or dur.", ZH: "此段落没有结束时间：请为它或外层的 div、body 设置 end 或 dur。"},
		"script.ass_format":             {EN: "The Format line of [Events] must name Start and End and end with Text.", ZH: "[Events] 的 Format 行必须包含 Start 和 End，并以 Text 结尾。"},
		"script.ass_fields":             {EN: "This Dialogue event has %d fields; the Format line names %d.", ZH: "此 Dialogue 事件有 %d 个字段，而 Format 行规定 %d 个。"},
		"script.csv_missing_columns":    {EN: "The header row lacks the column(s) %s. Required: start, end, character, text; emotion is optional.", ZH: "表头缺少列：%s。必需的列：start、end、character、text；emotion 可选。"},
		"script.csv_duplicate_column":   {EN: "The column %q appears twice in the header row.", ZH: "表头中的列 %q 出现了两次。"},
		"script.csv_column_count":       {EN: "This row has %d columns; the header row has %d.", ZH: "此行有 %d 列，而表头有 %d 列。"},
		"script.csv_bad_quote":          {EN: "A quoted field must be followed by a separator or the end of the row.", ZH: "带引号的字段之后必须是分隔符或行尾。"},
		"script.csv_unterminated_quote": {EN: "The quoted field that starts here is never closed.", ZH: "从此处开始的带引号字段没有结束引号。"},
	})
}
