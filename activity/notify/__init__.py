"""Notifications you can answer (Web Push): who is told of a run that needs them, what they are
told, and sending it once, off the request and ingest paths.

``vapid`` (this server's key pair), ``says`` (what a notification says), ``who`` (who is told:
wanted, not in quiet hours, not looking already), ``queue`` (what is owed
to which device, claimed so that each is sent once whichever process sees it first), ``send``
(one notification to one push service), ``worker`` (each process's task that queues and sends).

Email (docs/email.md): ``mailwho`` (who is mailed, at which confirmed addresses), ``mailsays``
(a mail's subject, text and HTML, its links and unsubscribe link), ``mailowed`` (what is owed
to which address, claimed once), ``mailsend`` (one mail through Django's mailer), ``mailwork``
(the notifier's mail round), ``mailaddresses`` (adding and confirming addresses),
``mailprefs`` (what a person wants mailed), ``digest`` (the daily digest).

Webhooks (docs/webhooks.md): ``hooks`` (which events are owed to which webhook, claimed once),
``hookbody`` (the Slack and the signed JSON formats), ``hookaddr`` (the address rules),
``hooksend`` (one signed post to the checked address, no redirects), ``hookqueue`` (claims,
retries with backoff, the notifier's webhook round), ``hooklog`` (the workspace page's log).

May import: ``activity.push`` (who is looking at a run) and every part below it.
"""
