package script_test

import (
	"errors"
	"fmt"
	"os"
	"time"

	"dubstudio/i18n"
	"dubstudio/studio/script"
)

func ExampleParse() {
	data := []byte("1\r\n00:00:01,000 --> 00:00:02,500\r\nALICE: <i>Hello,</i> Bob.\r\n\r\n" +
		"2\r\n00:00:02,000 --> 00:00:04,000\r\n<v Bob>Hi!\r\nHow are you?\r\n")
	cues, err := script.Parse("scene1.srt", data)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range cues {
		fmt.Printf("%s %s %s: %q %v\n", script.FormatTimecode(c.Start), script.FormatTimecode(c.End), c.Character, c.Text, c.Flags)
	}
	// Output:
	// 00:00:01.000 00:00:02.500 ALICE: "Hello, Bob." []
	// 00:00:02.000 00:00:04.000 Bob: "Hi!\nHow are you?" [overlap]
}

func ExampleParseError() {
	data := []byte("start,end,speaker,text\n00:00:01.000,00:00:0x,Bob,Hi\n00:00:03.000,00:00:02.000,Bob,Ho\n")
	_, err := script.Parse("lines.csv", data)
	var pe *script.ParseError
	if errors.As(err, &pe) {
		for _, p := range pe.Problems {
			fmt.Println(p.In(i18n.ZH))
		}
	}
	// Output:
	// 第 2 行：时间码 "00:00:0x" 无效：应写作 00:01:02,345、00:01:02.345、01:02.345 或 62.345。
	// 第 3 行：结束时间 00:00:02.000 早于开始时间 00:00:03.000。
}

func ExampleWriteVTT() {
	cues := []script.Cue{
		{Start: 1500 * time.Millisecond, End: 3 * time.Second, Character: "小明", Text: "你好！\n再见。"},
		{Start: 3 * time.Second, End: 4 * time.Second, Character: "Who?", Text: "<laughs> Me & you."},
	}
	if err := script.WriteVTT(os.Stdout, cues); err != nil {
		fmt.Println(err)
	}
	// Output:
	// WEBVTT
	//
	// 00:00:01.500 --> 00:00:03.000
	// <v 小明>你好！
	// 再见。
	//
	// 00:00:03.000 --> 00:00:04.000
	// <v Who?>&lt;laughs&gt; Me &amp; you.
}
