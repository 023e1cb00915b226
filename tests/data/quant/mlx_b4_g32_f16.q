F;›T»IL4¸eÏŒ€Q•šû÷e{ì;z|©çêè‹X/†6h<ƒs–26u6,´ êvPxb–I«9µ#c´™åÙOuÉUYúo“À8—GzÇƒh¾žw(}9«b¿——Ë×
÷xªcüèËc_‹xæZ™É›u«ãF5çÃÆˆü´Iu°9Yž‹j™x:fy—togI“{Æ’‘7fFszDY_DÒ?wxfúWu(«jUJ‡˜W7Iª§Y‰[ü\Yv‚1Xš²h