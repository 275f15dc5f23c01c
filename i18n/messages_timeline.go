package i18n

// Messages of the editor's timeline under the picture.
func init() {
	register(map[string]Message{
		"timeline.title":    {EN: "Timeline", ZH: "时间线"},
		"timeline.zoom_in":  {EN: "Zoom in", ZH: "放大"},
		"timeline.zoom_out": {EN: "Zoom out", ZH: "缩小"},
		"timeline.zoom_fit": {EN: "Fit", ZH: "适应宽度"},
		"timeline.hint":     {EN: "Drag a clip or its edges to move its slot (edges snap within %d px); Alt+←/→ nudges by a frame.", ZH: "拖动片段或其边缘以移动时段（边缘在 %d 像素内吸附）；Alt+←/→ 按一帧微调。"},
		"timeline.empty":    {EN: "No lines yet: import a script to see them on the timeline.", ZH: "还没有台词：导入剧本后即可在时间线上看到。"},
		"timeline.omitted": {EN: "The timeline shows the first %d lines; %d more are in the script only.", Count: 2,
			One: "The timeline shows the first %d lines; %d more is in the script only.", ZH: "时间线只显示前 %d 句；另有 %d 句仅在剧本中。"},
		"timeline.bad_slot": {EN: "A slot needs a start and an end in whole milliseconds, the end not before the start.", ZH: "时段需要以整毫秒表示的开始和结束时间，且结束不早于开始。"},
		"timeline.moved":    {EN: "Line %d now %s – %s.", ZH: "第 %d 句现在为 %s – %s。"},
		"timeline.moved_kept": {EN: "Line %d now %s – %s; its take is kept (same length, and it still fits before the next line).",
			ZH: "第 %d 句现在为 %s – %s；时长未变且仍在下一句之前结束，保留原录音。"},
		"timeline.moved_refit": {EN: "Line %d now %s – %s; its take ran into the next line, so the same performance is being fitted to the shorter gap (no new synthesis).",
			ZH: "第 %d 句现在为 %s – %s；原录音会延伸到下一句，正在将同一段表演重新适配到更短的间隔（不重新合成）。"},
		"timeline.saving":    {EN: "Saving…", ZH: "保存中…"},
		"line.conflict_slot": {EN: "%s changed this line in the meantime: its clip shows their version now; move it again to replace it.", ZH: "在此期间 %s 修改了这句台词：片段现在显示对方的版本；再次移动即可替换。"},
		"kb.tl_nudge":        {EN: "Timeline: move the selected clip by a frame of the picture (40 ms where its rate is not known)", ZH: "时间线：将选中的片段移动画面的一帧（帧率未知时为 40 毫秒）"},
		"kb.tl_trim":         {EN: "Timeline: move the selected clip's end by a frame", ZH: "时间线：将选中片段的结尾移动一帧"},
	})
}
