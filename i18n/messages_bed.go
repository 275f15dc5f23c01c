package i18n

// Messages of the music-and-effects bed: its card, the preview's sound choice and
// the export's mix over it.
func init() {
	register(map[string]Message{
		"bed.title":            {EN: "Music and effects (M&E bed)", ZH: "音乐与音效（M&E 底轨）"},
		"bed.hint":             {EN: "Upload the programme's music-and-effects track, or its full mix to be ducked (audio or video, up to %d MiB). The dub plays over it in the picture preview, and exports add it as its own stem and, on request, a mix of the dialogue over it.", ZH: "上传节目的音乐与音效轨，或需要压低的完整混音（音频或视频，最大 %d MiB）。画面预览中配音在其上播放；导出时作为单独的分轨，并可选择输出对白叠加其上的混音。"},
		"bed.upload":           {EN: "Upload", ZH: "上传"},
		"bed.remove":           {EN: "Remove", ZH: "移除"},
		"bed.remove_confirm":   {EN: "Remove the M&E bed? The preview and new exports will have the dub alone.", ZH: "确定移除 M&E 底轨吗？预览和新的导出将只有配音。"},
		"bed.none":             {EN: "No M&E bed yet.", ZH: "尚未上传 M&E 底轨。"},
		"bed.info":             {EN: "%s · %s · %d ch", ZH: "%s · %s · %d 声道"},
		"bed.saved":            {EN: "M&E bed saved.", ZH: "M&E 底轨已保存。"},
		"bed.removed":          {EN: "M&E bed removed.", ZH: "M&E 底轨已移除。"},
		"bed.kind_me":          {EN: "Music and effects (no dialogue)", ZH: "音乐与音效（无对白）"},
		"bed.kind_full_mix":    {EN: "Full mix, to be ducked", ZH: "完整混音（将被压低）"},
		"bed.bad_kind":         {EN: "Choose what the file is: music and effects, or a full mix to be ducked (got %q).", ZH: "请选择文件类型：音乐与音效，或需要压低的完整混音（收到 %q）。"},
		"bed.full_mix_note":    {EN: "A full mix keeps its original dialogue: under the dub it is only ducked (turned down while each line speaks), so the original voices stay faintly audible beneath the dub. Upload an M&E track without dialogue for a clean bed.", ZH: "完整混音保留其原始对白：在配音下它只会被压低（每句说话时降低音量），因此原声仍会在配音下隐约可闻。如需干净的底轨，请上传不含对白的 M&E 轨。"},
		"video.sound_bed":      {EN: "Dub over the bed", ZH: "配音叠加底轨"},
		"video.sound_dub_only": {EN: "Dub only", ZH: "仅配音"},
		"export.bed_mix":       {EN: "Mix over the M&E bed", ZH: "叠加 M&E 底轨的混音"},
		"export.bed_mix_hint":  {EN: "Adds mix_over_bed.wav: the dialogue over the bed, the bed ducked while lines speak, brought to %d LUFS (EBU R128; setting BED_MIX_LUFS). The bed's own stem (bed.wav) is always in the export when the project has one.", ZH: "增加 mix_over_bed.wav：对白叠加在底轨上，说话时底轨被压低，整体响度为 %d LUFS（EBU R128；设置 BED_MIX_LUFS）。项目有底轨时，导出总是包含底轨分轨（bed.wav）。"},
		"export.no_bed":        {EN: "The project has no M&E bed: upload one on the review page, or leave “Mix over the M&E bed” unticked.", ZH: "项目没有 M&E 底轨：请在审听页面上传，或取消勾选“叠加 M&E 底轨的混音”。"},
		"export.has_bed_mix":   {EN: "with a mix over the bed", ZH: "含叠加底轨的混音"},
	})
}
